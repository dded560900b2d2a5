"""The roofline step time: the least time the work of a step can take on a machine's ceilings.

The lab's one rule (chapters 2, 4, 5 and 8 call it; nothing else computes it):
- FLOPs: every new token through every layer, attention over its context, the LM head on the last
  position of each sequence (what `prefill()` and `decode_step()` compute) unless told otherwise;
- bytes that must be read: the matrix weights once per step, and each sequence's KV cache once
  (`cache="none"`: no cache, a forward that recomputes its keys and values reads weights only);
- bytes copied: DynamicCache's `torch.cat` reads the old cache and writes a new one every step
  (`cache="dynamic"`), at the copy ceiling where one is given (reading and writing), else the read one.
Time is the slower of the FLOPs at peak and the bytes at bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...plumbing.models import ModelSpec, cache_bytes
from ...plumbing.validate import one_of, positive
from ..formulas import forward_flops, weight_bytes_read
from ..hardware import GPUSpec
from .work import Work, check_work

CACHES = ("none", "static", "dynamic")


@dataclass(frozen=True)
class RooflineTerms:
    """The terms of a roofline step: FLOPs and bytes, and the seconds each takes at its ceiling."""

    flops: float
    read_bytes: float
    copy_bytes: float
    compute_s: float
    read_s: float
    copy_s: float

    @property
    def memory_s(self) -> float:
        """Seconds to move every byte: the reads and the copies."""
        return self.read_s + self.copy_s

    @property
    def time_s(self) -> float:
        """The roofline time: the slower of compute and memory."""
        return max(self.compute_s, self.memory_s)

    @property
    def bound(self) -> str:
        """'memory' or 'compute': the term that sets the time."""
        return "memory" if self.memory_s >= self.compute_s else "compute"


def step_roofline(spec: ModelSpec, work: Work, peak_flops: float, bandwidth: float, bytes_per_elem: int = 2,
                  cache: str = "static", copy_bandwidth: float | None = None,
                  logits_positions: int | None = 1) -> RooflineTerms:
    """The roofline terms of one step over `work` [(new tokens, context after)] per sequence.

    `bandwidth` is the read ceiling; `copy_bandwidth` the copy ceiling for DynamicCache's copies (default the
    read one); `logits_positions` per sequence (None: every new token, as a training-style forward)."""
    check_work(work)
    one_of("cache", cache, CACHES)
    flops = sum(forward_flops(spec, new, ctx, logits_positions=None if logits_positions is None
                              else min(logits_positions, new)) for new, ctx in work)
    held = [cache_bytes(spec, ctx, 1, bytes_per_elem) for _, ctx in work]  # what each sequence's cache holds
    kv_read = 0 if cache == "none" else sum(held)
    before = [cache_bytes(spec, ctx - new, 1, bytes_per_elem) if ctx > new else 0 for new, ctx in work]
    copied = sum(before) + sum(held) if cache == "dynamic" else 0
    read = weight_bytes_read(spec, bytes_per_elem, sum(new for new, _ in work)) + kv_read
    copy_rate = positive("copy_bandwidth", copy_bandwidth) if copy_bandwidth is not None else bandwidth
    return RooflineTerms(flops, read, copied, flops / positive("peak_flops", peak_flops),
                         read / positive("bandwidth", bandwidth), copied / copy_rate)


@dataclass(frozen=True)
class RooflineStepCost:
    """Step seconds on a GPU's roofline (`step_roofline` at its spec sheet's rates) plus a fixed overhead."""

    model: ModelSpec
    gpu: GPUSpec
    bytes_per_param: int = 2
    overhead_s: float = 0.0  # scheduling, launches, sampling: whatever the roofline leaves out
    tensor_parallel: int = 1  # GPUs sharing the step (communication is not modelled)

    def __call__(self, work: Work) -> float:
        """Seconds for one step over `work`."""
        tp = self.tensor_parallel
        terms = step_roofline(self.model, work, tp * self.gpu.peak_flops, tp * self.gpu.bandwidth, self.bytes_per_param)
        return terms.time_s + self.overhead_s


def request_roofline(spec: ModelSpec, n_in: int, n_out: int, peak_flops: float, bandwidth: float,
                     bytes_per_elem: int = 2, cache: str = "static") -> tuple[float, float]:
    """Roofline (TTFT, decode time) in seconds of one request at batch 1: a prefill, then n_out - 1 steps.

    A step's bytes grow linearly with the context, so the steps cost as many as at the mean context."""
    n_in, n_out = int(n_in), int(n_out)
    ttft = step_roofline(spec, [(n_in, n_in)], peak_flops, bandwidth, bytes_per_elem).time_s
    mean_context = n_in + n_out // 2
    step = step_roofline(spec, [(1, mean_context)], peak_flops, bandwidth, bytes_per_elem, cache).time_s
    return ttft, max(n_out - 1, 0) * step


def spec_sheet_time(spec: ModelSpec, n_new_tokens: int, context: int, batch_size: int, peak_flops: float,
                    bandwidth: float, bytes_per_elem: int) -> float:
    """What a spec-sheet calculator predicts: the roofline of all FLOPs (logits at every position), weights
    and KV read once."""
    work = [(n_new_tokens, context)] * batch_size
    return step_roofline(spec, work, peak_flops, bandwidth, bytes_per_elem, logits_positions=None).time_s


def compute_bound_batch(model: ModelSpec, context: int, peak_flops: float, bandwidth: float,
                        bytes_per_elem: int = 2, cache: str = "static") -> float:
    """Batch at which a decode step's FLOP time catches up with its byte time (inf: never, KV reads grow as fast).

    Solves B F / peak = (W + B K) / bandwidth, F the FLOPs of one token at `context`, W the weight bytes read and
    K one sequence's KV bytes per step (`cache="dynamic"` counts DynamicCache's copies too). W is a dense
    model's; a mixture of experts reads more experts as the batch grows, so for one this is a lower bound."""
    one = step_roofline(model, [(1, context)], peak_flops, bandwidth, bytes_per_elem, cache)
    weights = weight_bytes_read(model, bytes_per_elem, 1)
    kv = one.read_bytes + one.copy_bytes - weights
    gap = one.flops / peak_flops - kv / bandwidth
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
