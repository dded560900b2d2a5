"""Chapter 1 across GPUs: where each spec sheet's roofline bends, and a matmul on this device's roofline and a GPU's
(the chapter's widget)."""

from __future__ import annotations

import math

import pandas as pd
import torch

from ...plumbing.device import as_device
from ...plumbing.plots import new_figure, plot_roofline
from ...plumbing.timing import benchmark, format_seconds
from ..formulas import critical_tokens
from ..hardware import GPUSpec, gpu_spec
from .costs import bound_by, matmul_cost, predicted_time


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
