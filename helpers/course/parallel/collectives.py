"""Chapter 10, the communication model: a collective takes a fixed latency plus its bytes over a bandwidth
(the alpha-beta model), fitted on all-reduces timed here, or set from a link's spec sheet.

- `measure_collectives`: time all-reduce and all-gather at each message size, two ranks under torchrun;
- `fit_alpha_beta`: latency + bytes / bandwidth, fitted in relative error (sizes span decades);
- `LINKS` and `AlphaBeta` (in `hardware.links`): the links' spec sheets, and the model a fit and a link share;
- `CollectiveClock`: times every collective a tensor-parallel model issues, inside a rank."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ...plumbing.validate import non_negative, one_of, positive, positive_int
from ..hardware.links import LINKS, AlphaBeta, Link  # noqa: F401  (here before hardware.links held them)
from .launch import run_ranks, script_path

OPS = ("all_reduce", "all_gather")


def fit_alpha_beta(nbytes: Sequence[float], seconds: Sequence[float]) -> AlphaBeta:
    """The latency and bandwidth that fit the timed collectives best in relative error (each point counts alike
    from bytes to megabytes), both kept >= 0: a negative latency is refitted as pure bandwidth, and the reverse."""
    n, t = np.asarray(nbytes, dtype=float), np.asarray(seconds, dtype=float)
    if n.shape != t.shape or len(n) < 2:
        raise ValueError(f"nbytes and seconds must pair up, at least 2 points, got {len(n)} and {len(t)}")
    if not (np.all(n >= 0) and np.all(t > 0) and np.all(np.isfinite(t))):
        raise ValueError("nbytes must be >= 0 and seconds finite and > 0")
    rows = np.column_stack([1 / t, n / t])  # (alpha + n * inv_bw) / t = 1
    (alpha, inv_bw), *_ = np.linalg.lstsq(rows, np.ones_like(t), rcond=None)
    if alpha < 0:  # latency too small to see: bandwidth alone
        alpha, inv_bw = 0.0, float(np.sum(n / t) / np.sum((n / t) ** 2))
    if inv_bw <= 0:  # time flat in the sizes timed: latency alone
        alpha, inv_bw = float(np.sum(1 / t) / np.sum(1 / t**2)), 0.0
    return AlphaBeta(float(alpha), 1 / inv_bw if inv_bw > 0 else np.inf)


def fit_errors(fit: AlphaBeta, nbytes: Sequence[float], seconds: Sequence[float]) -> np.ndarray:
    """fit / measured - 1 at each point."""
    return np.array([fit(n) for n in nbytes]) / np.asarray(seconds, dtype=float) - 1




def measure_collectives(sizes: Sequence[int], ops: Sequence[str] = OPS, gaps: Sequence[float] = (0.0,),
                        warmup: int = 3, repeats: int = 20, nproc: int = 2, timeout_s: float = 120.0,
                        device: str = "cpu") -> pd.DataFrame:
    """Time each op at each message size (bytes) on `nproc` ranks under torchrun (gloo on CPU, NCCL on CUDA, one
    GPU a rank): one launch.

    Each gap (seconds) is a variant: that long of busy work before every timed call (0: back to back). One row
    per op, gap, size and rank: median, mean and quartiles of `repeats` calls after `warmup`."""
    for op in ops:
        one_of("ops", op, OPS)
    sizes = [positive_int("sizes", s) for s in sizes]
    gaps = [non_negative("gaps", g) for g in gaps]
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an integer >= 0, got {warmup!r}")
    args = dict(device=one_of("device", device, ("cpu", "cuda")), sizes=sizes, ops=list(ops), gaps=gaps, warmup=warmup,
                repeats=positive_int("repeats", repeats), timeout_s=positive("timeout_s", timeout_s))
    runs = run_ranks(script_path("allreduce_sweep"), args, nproc=nproc, timeout_s=timeout_s)
    return pd.DataFrame([row for run in runs for row in run["rows"]])


def slowest_rank(table: pd.DataFrame) -> pd.DataFrame:
    """Per op, gap and size, the slower rank's row: a collective is done when every rank has its result."""
    worst = table.loc[table.groupby(["op", "gap_s", "bytes"]).mean_s.idxmax()]
    return worst.drop(columns="rank").reset_index(drop=True)


def sync(tensor) -> None:
    """Wait for `tensor`'s device to finish its queued work (CUDA); nothing on a CPU, where calls are synchronous.
    Timing each collective this way also stops the GPU from overlapping it with the next kernels: it measures
    each term on its own, at a small cost to the step."""
    import torch

    if tensor.is_cuda:
        torch.cuda.synchronize(tensor.device)


class CollectiveClock:
    """Times every collective a tensor-parallel model issues while it is active (inside a rank).

    transformers' row-split layers call `torch.distributed.all_reduce` on their partial sums; what goes through
    DTensor (a vocabulary-split embedding's sum, the LM head's gather) calls the functional collectives. All three
    are wrapped: each call's entry and the moment its result is there are stamped with `time.perf_counter()` (a
    clock every process on the machine shares), so that the ranks' stamps can be set side by side."""

    def __init__(self):
        self.calls: list[tuple[str, float, float, int]] = []  # (op, entered, done, bytes of the result)
        self._saved: list[tuple[object, str, object]] = []

    def _timed(self, fn, op: str, wait=None):
        def timed(tensor, *args, **kwargs):
            sync(tensor)  # on a GPU: the work queued before the call is no part of it
            start = time.perf_counter()
            out = fn(tensor, *args, **kwargs)
            result = wait(out) if wait else tensor  # functional collectives return before the data is there
            sync(result)  # NCCL returns once the collective is queued: wait until it is done
            self.calls.append((op, start, time.perf_counter(), result.numel() * result.element_size()))
            return result if wait else out
        return timed

    def __enter__(self) -> CollectiveClock:
        import torch.distributed as dist
        import torch.distributed._functional_collectives as funcol

        # DTensor's all-gather: all_gather_single where torch has it (all_gather_tensor then calls it), else the older
        gather = "all_gather_single" if hasattr(funcol, "all_gather_single") else "all_gather_tensor"
        patches = [(dist, "all_reduce", self._timed(dist.all_reduce, "all_reduce")),
                   (funcol, "all_reduce", self._timed(funcol.all_reduce, "all_reduce", funcol.wait_tensor)),
                   (funcol, gather, self._timed(getattr(funcol, gather), "all_gather", funcol.wait_tensor))]
        for module, name, wrapper in patches:
            self._saved.append((module, name, getattr(module, name)))
            setattr(module, name, wrapper)
        return self

    def __exit__(self, *exc) -> None:
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)
        self._saved.clear()

    def take(self) -> list[tuple[str, float, float, int]]:
        """The calls recorded since the last take, and forget them."""
        calls, self.calls = self.calls, []
        return calls
