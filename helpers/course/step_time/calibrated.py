"""The calibrated step model: one forward step predicted from this device's calibration, term by term.

A step is `batch_size` sequences that each add `n_new_tokens` tokens and hold `context` tokens in the cache
afterwards, logits for the last position only (as `prefill()` and `decode_step()` compute them). Prefill is
`n_new_tokens == context`; a decode step is `n_new_tokens == 1`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ...plumbing.device import bytes_per_element
from ...plumbing.model_specs import expected_experts_hit
from ...plumbing.models import ModelSpec, cache_bytes
from ...plumbing.validate import positive_int
from ..formulas import matmul_params, routed_expert_params, score_flops
from .calibration import DTYPES, Calibration, calibrate, check_same_device, dtype_name
from .operators import op_profile
from .work import Work

COLUMNS = ["group", "flops", "bytes", "compute_s", "memory_s", "overhead_s", "time_s"]


def check_step(spec: ModelSpec, n_new_tokens: int, context: int, batch_size: int) -> None:
    """ValueErrors naming the argument and its range for a step the model cannot run."""
    positive_int("n_new_tokens", n_new_tokens)
    positive_int("batch_size", batch_size)
    if positive_int("context", context) < n_new_tokens:
        raise ValueError(f"context must be an integer >= n_new_tokens ({n_new_tokens}): it counts the new "
                         f"tokens too, got {context!r}")
    if context > spec.max_positions:
        raise ValueError(f"context must be <= {spec.max_positions} ({spec.name}'s max_positions), got {context!r}")


def resolve_calibration(calibration: Calibration | None, dtype) -> Calibration:
    """The calibration to predict with: the one given (checked: this device, this dtype), or calibrate()."""
    if calibration is None:
        return calibrate(dtype=None if dtype is None else DTYPES[dtype_name(dtype)])
    check_same_device(calibration)
    if dtype is not None and dtype_name(dtype) != calibration.dtype:
        raise ValueError(f"dtype must match the calibration's ({calibration.dtype}), got {dtype!r}: "
                         f"calibrate(dtype={dtype_name(dtype)!r}) measures that one")
    return calibration


def matmul_row(group: str, params: int, n_tokens: int, cal: Calibration, bytes_per_elem: int,
               layout: str, matrix_params: float = 0) -> dict:
    """Matrix products over `params` weights at `n_tokens` rows: the rate measured at that token
    count, for matrices of `matrix_params` weights each (0: the size the table was measured at)."""
    flops, nbytes = 2 * params * n_tokens, params * bytes_per_elem
    memory_s = nbytes / cal.read_bandwidth
    rate = cal.matmul_rate(n_tokens, layout) * cal.size_factor(matrix_params * bytes_per_elem, n_tokens)
    time_s = flops / rate
    return dict(group=group, flops=flops, bytes=nbytes, compute_s=flops / cal.peak_matmul_flops,
                memory_s=memory_s, overhead_s=0.0, time_s=time_s)


def stream_row(group: str, flops: float, nbytes: float, flop_rate: float, bandwidth: float) -> dict:
    """A group bound by whichever of its FLOPs and its bytes takes longer at the measured rates."""
    compute_s, memory_s = flops / flop_rate, nbytes / bandwidth
    return dict(group=group, flops=flops, bytes=nbytes, compute_s=compute_s, memory_s=memory_s,
                overhead_s=0.0, time_s=max(compute_s, memory_s))


def step_time_breakdown(spec: ModelSpec, n_new_tokens: int, context: int, batch_size: int = 1,
                        calibration: Calibration | None = None, dtype=None) -> pd.DataFrame:
    """One row per group of ops (matmuls, lm_head, attention, cache copies, elementwise, overhead), in seconds."""
    check_step(spec, n_new_tokens, context, batch_size)
    return work_breakdown(spec, [(n_new_tokens, context)] * batch_size, resolve_calibration(calibration, dtype))


def work_breakdown(spec: ModelSpec, work: Work, cal: Calibration) -> pd.DataFrame:
    """`work_terms` as a table: one row per group of ops."""
    return pd.DataFrame(work_terms(spec, work, cal), columns=COLUMNS)


def attended_tokens(spec: ModelSpec, kind: str, new: int, context: int) -> int:
    """Keys a layer's attention reads for a sequence adding `new` tokens: the cache it kept plus the new ones."""
    return min(context, spec.cached_tokens(kind, context - new) + new) if context > new else context


def layer_matrices(spec: ModelSpec) -> int:
    """Weight matrices one layer multiplies by outside its routed experts: GPT-2's fused QKV, attention out,
    MLP up and down; others' Q, K, V, O (latent attention: the same count) and a gated MLP, or, in an MoE
    layer, a router and each shared expert's three."""
    if spec.family == "gpt2":
        return 4
    return 4 + (1 + 3 * spec.n_shared_experts if spec.n_experts else 3)


def latent_params(spec: ModelSpec) -> int:
    """Weights that expand a cached latent into keys and values (kv_b_proj), every layer (0 without MLA)."""
    return spec.n_layers * spec.kv_lora_rank * spec.n_heads * (spec.head_dim - spec.qk_rope_head_dim + spec.v_head_dim)


def fresh_copy_bytes(spec: ModelSpec, work: Work, bytes_per_elem: int, threshold: int) -> int:
    """Bytes of DynamicCache's new K and V tensors that land in freshly mapped pages in a decode step: each of a
    layer's two (all sequences of the batch in one) that holds `threshold` bytes or more (0: never). A latent
    layer caches its latent as keys and its rotary part as values; a sliding layer's cat holds its window.

    Decode steps only: a prefill's first copy is left out (not measured here)."""
    if not threshold or all(new == ctx for new, ctx in work):
        return 0
    fresh = 0
    for kind in spec.layer_kinds():
        tokens = sum(attended_tokens(spec, kind, new, ctx) for new, ctx in work)  # what the cat returns
        widths = ((spec.kv_lora_rank, spec.qk_rope_head_dim) if kind == "latent"
                  else (spec.n_kv_heads * spec.head_dim,) * 2)
        fresh += sum(tokens * width * bytes_per_elem for width in widths
                     if tokens * width * bytes_per_elem >= threshold)
    return fresh


def work_terms(spec: ModelSpec, work: Work, cal: Calibration) -> list[dict]:
    """The terms of one forward over sequences that each add `new` tokens and then hold `context`
    tokens, as transformers runs it here.

    Sequences share the weights' reads and the operator calls; each has its own attention and
    cache. A mixture of experts reads the experts its tokens route to; latent attention expands its
    cached latent into every head's keys and values, each step, before it attends."""
    b = bytes_per_element(DTYPES[cal.dtype])
    tokens = sum(new for new, _ in work)
    attended = [(kind, new, attended_tokens(spec, kind, new, ctx)) for kind in spec.layer_kinds()
                for new, ctx in work]
    key_bytes = 2 * spec.n_kv_heads * spec.head_dim * b  # K and V of one token in one layer
    if spec.kv_lora_rank:  # the expanded keys and values attention reads
        key_bytes = spec.n_heads * (spec.head_dim + spec.v_head_dim) * b
    kv_read = key_bytes * sum(keys for _, _, keys in attended)
    scores = sum(score_flops(new, keys, spec.n_heads, spec.head_dim, causal=True, v_head_dim=spec.v_head_dim or None)
                 for _, new, keys in attended)
    # DynamicCache's torch.cat reads the old cache and writes the new one, every layer and step
    copies = sum(cache_bytes(spec, ctx - new, 1, b) if ctx > new else 0 for new, ctx in work)
    copies += sum(cache_bytes(spec, ctx, 1, b) for _, ctx in work)
    profile = op_profile(spec, "prefill" if any(new > 1 for new, _ in work) else "decode")
    elementwise = (profile.elementwise_bytes_per_token_layer * spec.n_layers
                   + profile.elementwise_bytes_per_token_fixed) * tokens * b / 4  # profiled in fp32
    n_ops = profile.ops(spec.n_layers)
    overhead_s = n_ops * cal.op_overhead(spec.family)
    head_params = spec.vocab_size * spec.d_model
    layout = "x@W" if spec.family == "gpt2" else "linear"  # GPT-2's Conv1D stores W as (d_in, d_out)
    dense_params = matmul_params(spec) - head_params - routed_expert_params(spec) - latent_params(spec)
    rows = [
        matmul_row("matmuls", dense_params, tokens, cal, b, layout,
                   dense_params / spec.n_layers / layer_matrices(spec)),
        matmul_row("lm_head (last position)", head_params, len(work), cal, b, "lm_head"),
        stream_row("attention", scores, kv_read, cal.attention_flops, cal.cache_bandwidth),
        stream_row("cache copies", 0, copies, 1.0, cal.cache_bandwidth),
        stream_row("elementwise", 0, elementwise, 1.0, cal.elementwise_bandwidth),
        dict(group=f"overhead ({n_ops} ops)", flops=0, bytes=0, compute_s=0.0, memory_s=0.0,
             overhead_s=overhead_s, time_s=overhead_s),
    ]
    fresh = fresh_copy_bytes(spec, work, b, cal.fresh_threshold)
    if fresh and cal.fresh_bandwidth:  # a CPU: copies past the allocator's mmap threshold map every page again
        rows.insert(4, stream_row("cache copies: fresh pages", 0, fresh, 1.0, cal.fresh_bandwidth))
    if spec.n_experts:  # each hit expert multiplies the tokens routed to it, tokens x k / hit on average
        hit = expected_experts_hit(spec.n_experts, spec.experts_per_token, tokens)
        rows.insert(1, matmul_row(f"experts ({hit:.1f} of {spec.n_experts} per layer)",
                                  round(spec.n_moe_layers * hit * spec.expert_params),
                                  tokens * spec.experts_per_token / hit, cal, b,
                                  "x@W" if spec.family == "gpt_oss" else "linear", spec.expert_params / 3))
        # two grouped products per MoE layer (gate/up, down), each walking every expert and calling each hit one
        walk_s = 2 * spec.n_moe_layers * (spec.n_experts * cal.expert_walk_s + hit * cal.expert_call_s)
        rows.append(dict(group="expert dispatch", flops=0, bytes=0, compute_s=0.0, memory_s=0.0,
                         overhead_s=walk_s, time_s=walk_s))
    if spec.kv_lora_rank:  # kv_b_proj over every cached latent, then the expanded K and V written
        latent = sum(ctx for _, ctx in work)
        rows.insert(2, matmul_row("latent expansion", latent_params(spec), latent, cal, b, "linear",
                                  latent_params(spec) / spec.n_layers))
        rows.insert(3, stream_row("expanded K/V writes", 0, key_bytes * spec.n_layers * latent, 1.0,
                                  cal.cache_bandwidth))
    return rows


@dataclass(frozen=True)
class CalibratedStepCost:
    """A step cost for chapter 5's simulator: `work` [(new tokens, context after)] per sequence -> seconds here."""

    model: ModelSpec
    calibration: Calibration

    def __call__(self, work: Work) -> float:
        """Predicted seconds of one engine step over `work` (0 for an empty step)."""
        if not work:
            return 0.0
        for new, ctx in work:
            check_step(self.model, new, ctx, 1)
        return total_time(work_terms(self.model, work, self.calibration), self.calibration.overlap)


def total_time(terms: pd.DataFrame | list[dict], overlap: bool) -> float:
    """Seconds of a step from its terms (a breakdown table or `work_terms`' rows): the sum, or (an
    accelerator's async queue) the slower of host and device."""
    rows = terms.to_dict("records") if isinstance(terms, pd.DataFrame) else terms
    host_s = sum(row["overhead_s"] for row in rows)
    device_s = sum(row["time_s"] for row in rows) - host_s
    return max(device_s, host_s) if overlap else device_s + host_s


def predict_step_time(spec: ModelSpec, n_new_tokens: int, context: int, batch_size: int = 1,
                      calibration: Calibration | None = None, dtype=None) -> float:
    """Predicted seconds of one forward step (prefill: n_new_tokens == context; decode: n_new_tokens == 1)."""
    check_step(spec, n_new_tokens, context, batch_size)
    cal = resolve_calibration(calibration, dtype)
    return total_time(work_terms(spec, [(n_new_tokens, context)] * batch_size, cal), cal.overlap)

