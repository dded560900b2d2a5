"""Chapter 1, compute vs memory bound: operations on the roofline, measured-vs-predicted tables, op counts."""

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

from ..plumbing.device import as_device
from ..plumbing.models import ModelSpec, build_config, fill_random_
from ..plumbing.timing import Timing
from .formulas import critical_tokens, matmul_bytes, matmul_flops, roofline_time, vector_add_bytes
from .hardware import GPUSpec


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
    return OpCost(f"vector add (n={n:,})", n, vector_add_bytes(n, bytes_per_elem))


def matmul_cost(n_tokens: int, d_in: int, d_out: int, bytes_per_elem: int) -> OpCost:
    """(n_tokens x d_in) activations times a (d_in x d_out) weight; n_tokens = 1 is a matrix-vector product."""
    kind = "matrix-vector" if n_tokens == 1 else "matmul"
    return OpCost(f"{kind} ({n_tokens} x {d_in}) @ ({d_in} x {d_out})", matmul_flops(n_tokens, d_in, d_out),
                  matmul_bytes(n_tokens, d_in, d_out, bytes_per_elem))


def predicted_time(cost: OpCost, peak_flops: float, bandwidth: float) -> float:
    """Roofline lower bound of an operation in seconds (formulas.roofline_time)."""
    return roofline_time(cost.flops, cost.nbytes, peak_flops, bandwidth)


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


# Operators that only allocate or relabel memory: like views, they launch no kernel.
_NO_KERNEL_OPS = frozenset({"aten::_unsafe_view", "aten::_reshape_alias", "aten::empty", "aten::empty_strided",
                            "aten::empty_like", "aten::new_empty", "aten::new_empty_strided"})


def launches_kernel(func) -> bool:
    """Whether an ATen operator can launch a kernel: not a view (its schema aliases the input) nor an allocation."""
    return not func.is_view and func._schema.name not in _NO_KERNEL_OPS


class _OpCounter(TorchDispatchMode):
    """Counts the ATen operators dispatched while active: all of them, and those that can launch a kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.kernel_count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        self.kernel_count += launches_kernel(func)
        return func(*args, **(kwargs or {}))


def count_ops(fn: Callable[[], object], views: bool = False) -> int:
    """How many ATen operators one call of fn() runs that can launch a kernel (all of them with views=True).

    The lab's one way to count operator calls (chapters 1 and 2), each counted once at dispatch (composites
    decomposed). Views, reshapes and allocations change only metadata and launch nothing, so they are left
    out: each op counted is about one kernel launch on a GPU (a few launch two)."""
    with torch.no_grad(), _OpCounter() as counter:
        fn()
    return counter.count if views else counter.kernel_count


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
    device = as_device(device)
    stack.to_empty(device=device)
    fill_random_(stack, device)
    with torch.no_grad():
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


def measured_matmul_rate(n_tokens: int, shape: tuple[int, int], dtype: torch.dtype, peak_flops: float,
                         bandwidth: float, device: torch.device | str | None = None,
                         budget_s: float = 0.02) -> tuple[float | None, str]:
    """(FLOP/s of a (B x D) @ (D x F) product timed here, ""), or (None, why not) if too slow or too big to time."""
    from ..plumbing.timing import benchmark, format_seconds

    device = as_device(device)
    cost = matmul_cost(n_tokens, *shape, torch.empty((), dtype=dtype).element_size())
    predicted_s = predicted_time(cost, peak_flops, bandwidth)
    if predicted_s > budget_s:
        return None, (f"not measured here: predicted {format_seconds(predicted_s)} per call, over the "
                      f"{format_seconds(budget_s)} a redraw may spend in {str(dtype).removeprefix('torch.')}")
    if cost.nbytes > 2**28:
        return None, f"not measured here: {cost.nbytes / 2**20:,.0f} MiB of operands, over 256 MiB"
    x = torch.randn(n_tokens, shape[0], dtype=dtype, device=device)  # (B, D)
    w = torch.randn(*shape, dtype=dtype, device=device)  # (D, F), one weight: a small one may sit in cache
    timing = benchmark(lambda: x @ w, device=device, warmup=1, min_run_time=0.05, min_runs=3)
    return cost.flops / timing.median, ""


def plot_matmul_on_roofline(ceilings, device: torch.device | str | None, title: str, n_tokens: int = 16,
                            shape: tuple[int, int] = (768, 3072), dtype_name: str = "", gpu: str = "H200",
                            measure: bool = True):
    """A (B x D) @ (D x F) product on this device's measured roofline and a GPU's spec one (chapter 1's widget).

    Draws both predicted points and, when it is quick to time here, the measured one. `ceilings` is
    `lab.ceilings`; a matmul mostly reads its weight, so the read (stream) bandwidth is its memory roof."""
    from ..plumbing.plots import new_figure, plot_roofline
    from ..plumbing.timing import format_seconds
    from .hardware import gpu_spec

    dtype_name = dtype_name or ceilings.default_dtype
    dtype = getattr(torch, dtype_name)
    cost = matmul_cost(n_tokens, *shape, torch.empty((), dtype=dtype).element_size())
    here_peak, here_bw = ceilings.flops.get(dtype_name, ceilings.peak_flops), ceilings.stream_bandwidth
    spec = gpu_spec(gpu)
    gpu_peak = spec.fp32_tflops * 1e12 if dtype == torch.float32 else spec.peak_flops
    _, (ax,) = new_figure(width=7)
    plot_roofline(here_peak, here_bw, ax=ax, label=f"{ceilings.device} (measured)")
    plot_roofline(gpu_peak, spec.bandwidth, ax=ax, label=f"{spec.name} {dtype_name} (spec)")
    for name, peak, bandwidth in (("here", here_peak, here_bw), (spec.name, gpu_peak, spec.bandwidth)):
        t = predicted_time(cost, peak, bandwidth)
        ax.loglog(cost.intensity, cost.flops / t, "s", ms=9, mfc="none",
                  label=f"predicted on {name}: {format_seconds(t)} ({bound_by(cost, peak, bandwidth)}-bound)")
    if measure:
        budget_s = 0.02 if dtype_name == ceilings.default_dtype else 0.0005  # other dtypes can be far slower
        rate, why_not = measured_matmul_rate(n_tokens, shape, dtype, here_peak, here_bw, device, budget_s)
        if rate is None:
            ax.text(0.02, 0.97, why_not, transform=ax.transAxes, fontsize=7, va="top")
        else:
            ax.loglog(cost.intensity, rate, "*", ms=14, label=f"measured here: {format_seconds(cost.flops / rate)}")
    ax.set_title(f"({n_tokens} x {shape[0]}) @ ({shape[0]} x {shape[1]}) in {dtype_name}, "
                 f"intensity {cost.intensity:.3g} FLOP/byte\n{title}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    return ax
