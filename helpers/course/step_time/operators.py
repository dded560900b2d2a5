"""What one forward pass of an architecture dispatches: operator counts and the bytes its non-matmul ops move.

Counted once per architecture on a 1- and a 2-layer random copy (narrower where the real width would be
large), so the count per layer and the fixed part come apart. Cached: nothing here is timed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

import torch

from ...plumbing.logs import quiet_transformers
from ...plumbing.models import ModelSpec, build_config, cut_layers, random_model
from ..phases import decode_step, prefill
from ..roofline.op_counts import DispatchRecorder

PROFILE_TOKENS = 8  # prompt tokens of the profiling forward (decode: one token over this many)
MAX_PROFILE_LAYER_PARAMS = 20_000_000  # wider layers are profiled narrower and their bytes scaled back up


@dataclass(frozen=True)
class OpProfile:
    """Operators one forward dispatches (fixed + per layer) and elementwise bytes per token (fp32, per layer)."""

    ops_fixed: int
    ops_per_layer: int
    elementwise_bytes_per_token_layer: float  # norms, activations, residual adds, rotary, copies: fp32 bytes
    elementwise_bytes_per_token_fixed: float  # embedding, final norm

    def ops(self, n_layers: int) -> int:
        """Operator calls of a forward through `n_layers` layers."""
        return self.ops_fixed + self.ops_per_layer * n_layers


def op_kind(name: str) -> str:
    """'matmul', 'attention', 'cache' (torch.cat of the KV cache) or 'elementwise' for an ATen op's name."""
    if any(k in name for k in ("aten.mm.", "aten.addmm.", "aten.bmm.", "aten.baddbmm.", "grouped_mm")):
        return "matmul"
    if "scaled_dot_product" in name:
        return "attention"
    return "cache" if name.startswith("aten.cat.") else "elementwise"


class _OpRecorder(DispatchRecorder):
    """The dispatch record of a forward, read as the step model needs it: the operators that can launch a kernel
    (as count_ops counts them, which the calibration's cost per operator call divides by), and the bytes (inputs +
    outputs) of the elementwise ones."""

    @property
    def count(self) -> int:
        """Operator calls that can launch a kernel."""
        return self.kernel_count

    @property
    def elementwise_bytes(self) -> int:
        """Bytes the elementwise operators read and write (views left out)."""
        return sum(op.nbytes for op in self.ops if not op.is_view and op_kind(op.name) == "elementwise")


def width_divisor(spec: ModelSpec) -> int:
    """A power of 2 that narrows a layer under MAX_PROFILE_LAYER_PARAMS (1 for the small models)."""
    per_layer = (spec.active_params - spec.vocab_size * spec.d_model) / spec.n_layers
    k = 1
    unit = spec.n_heads if spec.family == "gpt2" else 1  # GPT-2's head_dim is d_model / n_heads
    while per_layer / k**2 > MAX_PROFILE_LAYER_PARAMS and spec.d_model % (2 * k * unit) == 0:
        k *= 2
    return k


PROFILE_EXPERTS = 16  # experts per MoE layer in a profiling copy: the grouped kernel's calls do not depend on it


def profile_layers(spec: ModelSpec, n_layers: int) -> ModelSpec:
    """`spec` cut to `n_layers` alike layers (every MLP an MoE in an MoE model, so 1 and 2 layers differ by
    one typical layer) with at most PROFILE_EXPERTS experts and a 256-token vocabulary."""
    experts = max(spec.experts_per_token, min(spec.n_experts, PROFILE_EXPERTS))
    return replace(cut_layers(spec, n_layers), n_dense_layers=0, n_experts=experts, vocab_size=256,
                   max_positions=4096)  # room for the many decode steps a timing loop appends


def narrow_spec(spec: ModelSpec, n_layers: int, k: int) -> ModelSpec:
    """The same architecture with `n_layers` layers, widths divided by k and a 256-token vocabulary."""
    head_dim = spec.d_model // k // spec.n_heads if spec.family == "gpt2" else max(8, spec.head_dim // k)
    rope = max(4, spec.qk_rope_head_dim // k)
    latent = dict(kv_lora_rank=max(8, spec.kv_lora_rank // k), q_lora_rank=spec.q_lora_rank // k,
                  qk_rope_head_dim=rope, v_head_dim=max(8, spec.v_head_dim // k),
                  head_dim=max(rope + 4, head_dim)) if spec.kv_lora_rank else dict(head_dim=head_dim)
    return replace(profile_layers(spec, n_layers), d_model=spec.d_model // k, d_ff=spec.d_ff // k,
                   expert_d_ff=spec.expert_d_ff // k, **latent)


TOY_HEADS = 4  # the same small width for every family, so the toy's time is its calls, not its arithmetic


def tiny_spec(spec: ModelSpec, n_layers: int = 2) -> ModelSpec:
    """The architecture at toy width (4 heads of 8; a GQA model keeps fewer KV heads than query heads): its
    forward runs the same operators per layer as the full model, and its time is almost all operator overhead.

    The head count sets no operator count (attention takes all heads in one call), only the arithmetic."""
    kv_heads = TOY_HEADS if spec.n_kv_heads == spec.n_heads else max(1, TOY_HEADS * spec.n_kv_heads // spec.n_heads)
    d_model = 8 * TOY_HEADS
    latent = dict(kv_lora_rank=16, q_lora_rank=16 if spec.q_lora_rank else 0, qk_rope_head_dim=4, v_head_dim=8,
                  head_dim=12, n_kv_heads=TOY_HEADS) if spec.kv_lora_rank else dict(head_dim=8, n_kv_heads=kv_heads)
    return replace(profile_layers(spec, n_layers), d_model=d_model, d_ff=2 * d_model, n_heads=TOY_HEADS,
                   expert_d_ff=d_model if spec.n_experts else 0, **latent)


def narrow_model(spec: ModelSpec, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
    """A random model of a narrowed or toy spec, built without transformers' vocabulary warnings."""
    with quiet_transformers():
        return random_model(build_config(spec), device, dtype)


def _record(model, phase: str) -> _OpRecorder:
    """Record one prefill of PROFILE_TOKENS tokens, or one decode step after it."""
    ids = torch.zeros(1, PROFILE_TOKENS, dtype=torch.long)
    recorder = _OpRecorder()
    with torch.no_grad():
        if phase == "prefill":
            with recorder:
                prefill(model, ids)
        else:
            token, kv = prefill(model, ids)
            with recorder:
                decode_step(model, token, kv)
    return recorder


@cache
def op_profile(spec: ModelSpec, phase: str) -> OpProfile:
    """Operator counts and elementwise bytes of `spec`'s forward in `phase` ('prefill' or 'decode'), cached."""
    if phase not in ("prefill", "decode"):
        raise ValueError(f"phase must be one of ('prefill', 'decode'), got {phase!r}")
    k = width_divisor(spec)
    runs = [_record(narrow_model(narrow_spec(spec, n_layers, k)), phase) for n_layers in (1, 2)]
    tokens = PROFILE_TOKENS if phase == "prefill" else 1
    per_layer = runs[1].elementwise_bytes - runs[0].elementwise_bytes
    fixed = runs[0].elementwise_bytes - per_layer
    return OpProfile(runs[0].count - (runs[1].count - runs[0].count), runs[1].count - runs[0].count,
                     k * per_layer / tokens, k * max(fixed, 0) / tokens)
