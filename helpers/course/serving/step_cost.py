"""Chapter 5, step costs: how long one engine step takes, fitted to this device or from a GPU's roofline.

This device's predicted (not fitted) cost is chapter 8's `step_model.CalibratedStepCost`: the same call,
`cost(work)` with one (new tokens, context after the step) per sequence."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...plumbing.models import ModelSpec
from ..formulas import decode_step_bytes, forward_flops, roofline_time, weight_bytes_read
from ..hardware import GPUSpec

Work = Sequence[tuple[int, int]]  # one (new tokens this step, context length after the step) per sequence


@dataclass(frozen=True)
class LinearStepCost:
    """Step seconds = fixed + per_token x new tokens + per_context_token x KV tokens read
    + per_sequence x sequences in the step (fitted here)."""

    fixed_s: float
    per_token_s: float
    per_context_token_s: float = 0.0
    per_sequence_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("fixed_s", "per_token_s", "per_context_token_s", "per_sequence_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")

    def __call__(self, work: Work) -> float:
        """Seconds for one step over `work`."""
        return (self.fixed_s + self.per_token_s * sum(new for new, _ in work)
                + self.per_context_token_s * sum(ctx for _, ctx in work) + self.per_sequence_s * len(work))


@dataclass(frozen=True)
class RooflineStepCost:
    """Step seconds on a GPU's roofline: max(FLOPs / peak, (matrix weights + KV read) / bandwidth) + overhead."""

    model: ModelSpec
    gpu: GPUSpec
    bytes_per_param: int = 2
    overhead_s: float = 0.0  # scheduling, launches, sampling: whatever the roofline leaves out
    tensor_parallel: int = 1  # GPUs sharing the step (communication is not modelled)

    def __call__(self, work: Work) -> float:
        """Seconds for one step over `work`."""
        # one position per sequence runs the LM head, as prefill() keeps only the last logits (logits_to_keep=1)
        flops = sum(forward_flops(self.model, n, c, logits_positions=1) for n, c in work)
        kv_read = self.model.kv_bytes_per_token(self.bytes_per_param) * sum(c for _, c in work)
        nbytes = weight_bytes_read(self.model, self.bytes_per_param) + kv_read
        tp = self.tensor_parallel
        return roofline_time(flops, nbytes, tp * self.gpu.peak_flops, tp * self.gpu.bandwidth) + self.overhead_s


def compute_bound_batch(model: ModelSpec, context: int, peak_flops: float, bandwidth: float,
                        bytes_per_elem: int = 2, cache: str = "static") -> float:
    """Batch at which a decode step's FLOP time catches up with its byte time (inf: never, KV reads grow as fast).

    Solves B F / peak = (W + B K) / bandwidth, F the FLOPs of one token at `context`, W the weight bytes read and
    K one sequence's KV bytes per step (`cache="dynamic"` counts DynamicCache's copies, `decode_step_bytes`)."""
    flops = forward_flops(model, 1, context)
    weights = weight_bytes_read(model, bytes_per_elem)
    kv = decode_step_bytes(model, context, 1, bytes_per_elem, cache) - weights
    gap = flops / peak_flops - kv / bandwidth
    return weights / bandwidth / gap if gap > 0 else math.inf


def longest_compute_bound_context(model: ModelSpec, peak_flops: float, bandwidth: float, bytes_per_elem: int = 2,
                                  cache: str = "static", limit: int = 1 << 20) -> int:
    """Longest context at which a decode step can still reach the compute roof (0: at no context, up to `limit`).

    Past it each sequence's KV bytes / bandwidth exceed its FLOPs / peak, so no batch turns the step compute-bound
    (`compute_bound_batch` is inf); KV read once per step with the default `cache="static"`."""
    def bends(context: int) -> bool:
        return math.isfinite(compute_bound_batch(model, context, peak_flops, bandwidth, bytes_per_elem, cache))

    if not bends(1):
        return 0
    low, high = 1, limit  # bends(low) holds; the KV term grows faster with context than the FLOPs do
    if bends(high):
        return high
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if bends(mid) else (low, mid)
    return low


def fit_linear_cost(tokens: Sequence[float], seconds: Sequence[float],
                    context_tokens: Sequence[float] | None = None,
                    sequences: Sequence[float] | None = None) -> LinearStepCost:
    """Least-squares fit of step seconds to tokens (and KV tokens read, and sequences), coefficients clipped at 0."""
    if len(tokens) != len(seconds) or len(tokens) < 2:
        raise ValueError(f"need >= 2 matching (tokens, seconds) points, got {len(tokens)} and {len(seconds)}")
    columns = {"fixed": np.ones(len(tokens)), "tokens": np.asarray(tokens, float)}
    for name, values in (("context_tokens", context_tokens), ("sequences", sequences)):
        if values is not None:
            if len(values) != len(tokens):
                raise ValueError(f"{name} must have one value per point")
            columns[name] = np.asarray(values, float)
    coef, *_ = np.linalg.lstsq(np.column_stack(list(columns.values())), np.asarray(seconds, float), rcond=None)
    fitted = dict(zip(columns, np.clip(coef, 0.0, None), strict=True))
    return LinearStepCost(float(fitted["fixed"]), float(fitted["tokens"]), float(fitted.get("context_tokens", 0.0)),
                          float(fitted.get("sequences", 0.0)))
