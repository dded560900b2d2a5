"""Chapter 5, serving metrics as vLLM's benchmark reports them, and a check that a run served every request."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..latency import percentiles
from .requests import Request, Served
from .simulator import Simulation


def serving_metrics(served: Sequence[Served], qs: Sequence[int] = (50, 90, 99)) -> dict[str, float]:
    """vLLM benchmark metrics: throughputs, and mean / percentiles of TTFT, TPOT, ITL, E2EL (seconds)."""
    done = [s for s in served if s.ok and s.token_times]
    failed = len(served) - len(done)
    if not done:
        raise ValueError(f"no request produced a token ({failed} failed)")
    start = min(s.request.arrival for s in done)
    duration = max(s.token_times[-1] for s in done) - start
    out_tokens = sum(len(s.token_times) for s in done)
    in_tokens = sum(s.request.prompt_len for s in done)
    metrics: dict[str, float] = {
        "completed": len(done), "failed": failed, "duration_s": duration,
        "request_throughput": len(done) / duration if duration > 0 else math.nan,
        "output_throughput": out_tokens / duration if duration > 0 else math.nan,
        "total_token_throughput": (in_tokens + out_tokens) / duration if duration > 0 else math.nan,
    }
    samples = {"ttft": [s.ttft for s in done], "tpot": [s.tpot for s in done if len(s.token_times) > 1],
               "itl": [g for s in done for g in s.itl], "e2el": [s.e2el for s in done]}
    for name, values in samples.items():
        metrics[f"{name}_mean_s"] = float(np.mean(values)) if values else math.nan
        metrics.update(percentiles(values, qs, prefix=name))
    return metrics


def check_conservation(requests: Sequence[Request], sim: Simulation) -> None:
    """Raise AssertionError unless every request was served exactly once with all its tokens, in order."""
    ids = [s.request.id for s in sim.served]
    assert sorted(ids) == sorted(r.id for r in requests), "served ids differ from the requests' ids"
    for s in sim.served:
        r = s.request
        assert len(s.token_times) == r.output_len, f"request {r.id}: {len(s.token_times)} of {r.output_len} tokens"
        assert s.token_times[0] > r.arrival, f"request {r.id}: a token before its arrival"
        assert all(np.diff(s.token_times) > 0), f"request {r.id}: tokens out of order"
