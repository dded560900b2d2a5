"""Roofline (chapter 1): FLOPs and bytes of simple operations, measured-vs-predicted tables, op counts."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from .device import as_device
from .formulas import matmul_bytes, matmul_flops
from .hardware import GPUSpec
from .models import ModelSpec, build_config
from .timing import Timing


@dataclass(frozen=True)
class OpCost:
    """What an operation must do at least: FLOPs and bytes moved between memory and the chip."""

    label: str
    flops: int
    nbytes: int

    @property
    def intensity(self) -> float:
        """Arithmetic intensity in FLOP per byte."""
        return self.flops / self.nbytes


def vector_add_cost(n: int, bytes_per_elem: int) -> OpCost:
    """c = a + b over n elements: n FLOPs, read a and b, write c (3 n elements)."""
    if n <= 0 or bytes_per_elem <= 0:
        raise ValueError(f"n and bytes_per_elem must be > 0, got {n} and {bytes_per_elem}")
    return OpCost(f"vector add (n={n:,})", n, 3 * n * bytes_per_elem)


def matmul_cost(n_tokens: int, d_in: int, d_out: int, bytes_per_elem: int) -> OpCost:
    """(n_tokens x d_in) activations times a (d_in x d_out) weight; n_tokens = 1 is a matrix-vector product."""
    kind = "matrix-vector" if n_tokens == 1 else "matmul"
    return OpCost(f"{kind} ({n_tokens} x {d_in}) @ ({d_in} x {d_out})", matmul_flops(n_tokens, d_in, d_out),
                  matmul_bytes(n_tokens, d_in, d_out, bytes_per_elem))


def matmul_intensity(n_tokens: float, d_in: int, d_out: int, bytes_per_elem: int) -> float:
    """2 B D F / (bpe (B D + D F + B F)) = (2 / bpe) / (1/B + 1/D + 1/F): about 2 B / bpe when B << D, F."""
    return (2 / bytes_per_elem) / (1 / n_tokens + 1 / d_in + 1 / d_out)


def critical_tokens(d_in: int, d_out: int, ridge: float, bytes_per_elem: int) -> float:
    """Token count B at which a (B x d_in)(d_in x d_out) product reaches intensity `ridge` (inf if it never does)."""
    if ridge <= 0:
        raise ValueError(f"ridge must be > 0 FLOP/byte, got {ridge}")
    # Solve (2 / bpe) / (1/B + 1/D + 1/F) = ridge for B.
    slack = 2 / (bytes_per_elem * ridge) - 1 / d_in - 1 / d_out
    return math.inf if slack <= 0 else 1 / slack


def predicted_time(cost: OpCost, peak_flops: float, bandwidth: float) -> float:
    """Roofline lower bound in seconds: max(FLOPs / peak, bytes / bandwidth)."""
    return max(cost.flops / peak_flops, cost.nbytes / bandwidth)


def bound_by(cost: OpCost, peak_flops: float, bandwidth: float) -> str:
    """'memory' if moving the bytes takes longer than the arithmetic at peak, else 'compute'."""
    return "memory" if cost.nbytes / bandwidth >= cost.flops / peak_flops else "compute"


def roofline_row(cost: OpCost, timing: Timing, peak_flops: float, bandwidth: float) -> dict:
    """One row of a measured-vs-predicted table: intensity, both times, rates, and % of the binding ceiling."""
    bound = bound_by(cost, peak_flops, bandwidth)
    flops_per_s, bytes_per_s = cost.flops / timing.median, cost.nbytes / timing.median
    return {
        "label": cost.label, "flops": cost.flops, "bytes": cost.nbytes, "intensity": cost.intensity,
        "predicted_s": predicted_time(cost, peak_flops, bandwidth), "measured_s": timing.median,
        "iqr_s": timing.iqr, "min_s": timing.min, "flops_per_s": flops_per_s, "GB_per_s": bytes_per_s / 1e9,
        "bound": bound,
        "pct_of_ceiling": 100 * (bytes_per_s / bandwidth if bound == "memory" else flops_per_s / peak_flops),
    }


def roofline_table(measured: list[tuple[OpCost, Timing]], peak_flops: float, bandwidth: float) -> pd.DataFrame:
    """Measured-vs-predicted table for (cost, timing) pairs, one row each."""
    return pd.DataFrame([roofline_row(cost, timing, peak_flops, bandwidth) for cost, timing in measured])


def beats_roof(table: pd.DataFrame, slack: float = 0.1) -> pd.DataFrame:
    """Rows measured faster than the roofline bound by more than their spread plus `slack` (fraction)."""
    return table[table["measured_s"] + table["iqr_s"] < (1 - slack) * table["predicted_s"]]


def rotating_weights(d_in: int, d_out: int, total_bytes: int, dtype: torch.dtype,
                     device: torch.device | str | None = None) -> list[torch.Tensor]:
    """Enough distinct (d_in x d_out) weights to fill `total_bytes`, so cycling them defeats the caches."""
    device = as_device(device)
    one = d_in * d_out * torch.empty((), dtype=dtype).element_size()
    count = max(2, math.ceil(total_bytes / one))
    return [torch.empty(d_in, d_out, dtype=dtype, device=device).uniform_(-0.02, 0.02) for _ in range(count)]


def rotating_matmul(x: torch.Tensor, weights: list[torch.Tensor]) -> Callable[[], torch.Tensor]:
    """A callable doing x @ W with the next weight of the list each call, like successive layers."""
    cycle = itertools.cycle(weights)
    return lambda: x @ next(cycle)


class _OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched while active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def count_ops(fn: Callable[[], object]) -> int:
    """How many ATen operators (roughly, kernel launches) one call of fn() dispatches."""
    with torch.no_grad(), _OpCounter() as counter:
        fn()
    return counter.count


def count_flops(fn: Callable[[], object]) -> dict[str, int]:
    """FLOPs per operator of one call of fn(), as torch.utils.flop_counter.FlopCounterMode counts them."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return {str(op).removeprefix("aten."): int(n) for op, n in counter.get_flop_counts()["Global"].items()}


class BlockStack(nn.Module):
    """GPT-2 transformer blocks applied in order (no embeddings, no LM head): (B, T, d) -> (B, T, d)."""

    def __init__(self, blocks: list[nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            out = block(hidden)
            hidden = out[0] if isinstance(out, tuple) else out  # older transformers return a tuple
        return hidden


def gpt2_blocks(spec: ModelSpec, n_blocks: int, device: torch.device | str | None = None,
                dtype: torch.dtype = torch.float32, attention: str = "sdpa") -> BlockStack:
    """`n_blocks` GPT-2 blocks of `spec`'s size with random weights, built fast (meta device, then filled)."""
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    if spec.family != "gpt2":
        raise ValueError(f"spec must be a GPT-2 model, got family {spec.family!r}")
    config = build_config(spec)
    config._attn_implementation = attention  # "eager" makes the attention products visible to FlopCounterMode
    with torch.device("meta"):
        stack = BlockStack([GPT2Block(config, layer_idx=i) for i in range(n_blocks)])
    stack.to_empty(device=as_device(device))
    with torch.no_grad():
        for name, param in stack.named_parameters():
            if param.dim() == 1:
                param.fill_(0.0 if name.endswith("bias") else 1.0)
            else:
                param.uniform_(-0.02, 0.02)
        for buffer in stack.buffers():  # transformers < 5 kept a causal mask and a mask fill value here
            if buffer.dtype == torch.bool:
                buffer.copy_(torch.tril(torch.ones_like(buffer)))
            else:
                buffer.fill_(torch.finfo(buffer.dtype).min)
    return stack.to(dtype).eval()


def gpu_ridge_table(specs: dict[str, GPUSpec], shapes: dict[str, tuple[int, int]]) -> pd.DataFrame:
    """Per GPU: bf16 peak, bandwidth, ridge point, and the batch at which each (D x F) weight turns compute-bound."""
    rows = []
    for spec in specs.values():
        row = {"GPU": spec.name, "bf16 TFLOP/s": spec.bf16_tflops, "bandwidth TB/s": spec.bandwidth_gbs / 1e3,
               "ridge (FLOP/byte)": round(spec.ridge_point)}
        for name, (d_in, d_out) in shapes.items():
            batch = critical_tokens(d_in, d_out, spec.ridge_point, 2)
            row[f"batch for {name}"] = math.ceil(batch) if math.isfinite(batch) else "never"
        rows.append(row)
    return pd.DataFrame(rows)
