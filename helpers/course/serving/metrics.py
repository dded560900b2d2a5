"""Chapter 5, serving metrics and goodput as vLLM's benchmark reports them; a check that a run served every request."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...plumbing.validate import positive
from ..latency import percentiles
from .requests import Request, Served
from .simulator.simulation import Simulation


def _completed(served: Sequence[Served]) -> tuple[list[Served], int, float]:
    """The requests that finished with tokens, how many failed, and the duration: first arrival to last token."""
    done = [s for s in served if s.ok and s.token_times]
    failed = len(served) - len(done)
    if not done:
        raise ValueError(f"no request produced a token ({failed} failed)")
    duration = max(s.token_times[-1] for s in done) - min(s.request.arrival for s in done)
    return done, failed, duration


def serving_metrics(served: Sequence[Served], qs: Sequence[int] = (50, 90, 99)) -> dict[str, float]:
    """vLLM benchmark metrics: throughputs, and mean / percentiles of TTFT, TPOT, ITL, E2EL (seconds)."""
    done, failed, duration = _completed(served)
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


def goodput(served: Sequence[Served], ttft_s: float | None = None, tpot_s: float | None = None,
            e2el_s: float | None = None) -> dict[str, float]:
    """Good requests per second: completed ones meeting every SLO given (each metric <= its target, in seconds).

    As vLLM's `--goodput` (`vllm/benchmarks/serve.py`, `calculate_metrics`): a 1-token request's TPOT counts
    as 0, and goodput = good / the benchmark's duration (here serving_metrics' first arrival to last token).
    `good_share` is good / every request sent, failed ones included; a failed request is never good.
    """
    slos = {"ttft_s": ttft_s, "tpot_s": tpot_s, "e2el_s": e2el_s}
    given = {name: positive(name, target) for name, target in slos.items() if target is not None}
    if not given:
        raise ValueError("goodput needs at least one SLO: ttft_s, tpot_s or e2el_s")
    done, failed, duration = _completed(served)

    def meets(s: Served) -> bool:
        measured = {"ttft_s": s.ttft, "tpot_s": s.tpot if len(s.token_times) > 1 else 0.0, "e2el_s": s.e2el}
        return all(measured[name] <= target for name, target in given.items())

    good = sum(meets(s) for s in done)
    return {"good": good, "completed": len(done), "failed": failed, "duration_s": duration,
            "goodput": good / duration if duration > 0 else math.nan, "good_share": good / len(served)}


def check_conservation(requests: Sequence[Request], sim: Simulation) -> None:
    """Raise AssertionError unless every request was served exactly once with all its tokens, in order."""
    ids = [s.request.id for s in sim.served]
    assert sorted(ids) == sorted(r.id for r in requests), "served ids differ from the requests' ids"
    for s in sim.served:
        r = s.request
        assert len(s.token_times) == r.output_len, f"request {r.id}: {len(s.token_times)} of {r.output_len} tokens"
        assert s.token_times[0] > r.arrival, f"request {r.id}: a token before its arrival"
        assert all(np.diff(s.token_times) > 0), f"request {r.id}: tokens out of order"
