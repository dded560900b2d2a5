"""Chapter 1, compute vs memory bound: what an operation must do (FLOPs, bytes), its roofline time, and tables of
measured against predicted."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
import torch

from ...plumbing.device import as_device
from ...plumbing.timing import Timing
from ..formulas import matmul_bytes, matmul_flops, roofline_time, vector_add_bytes


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
