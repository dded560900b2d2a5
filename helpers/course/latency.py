"""Latency metrics of one request from its token timestamps: TTFT, TPOT, ITL, E2EL (chapters 2 and 5).

The definitions are vLLM's benchmark's (``benchmarks/benchmark_serving.py``), all in seconds from the
request's start:
- TTFT: start to the first new token (the prefill, plus picking its token).
- ITL: gap between consecutive new tokens (one per decode step).
- E2EL: start to the last new token, so ``ttft + sum(itl) == e2el``.
- TPOT: ``(e2el - ttft) / (n_tokens - 1)``, the mean decode step (NaN for one token).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np


class TokenTimes:
    """The metrics of a request whose `timestamps` are seconds since it started, one per new token."""

    timestamps: list[float]

    @property
    def n_tokens(self) -> int:
        """Number of new tokens that arrived."""
        return len(self.timestamps)

    @property
    def ttft(self) -> float:
        """Time to first token."""
        return self.timestamps[0]

    @property
    def e2el(self) -> float:
        """End-to-end latency: start to the last token."""
        return self.timestamps[-1]

    @property
    def itl(self) -> list[float]:
        """Inter-token latencies: one gap per token after the first."""
        return np.diff(self.timestamps).tolist()

    @property
    def tpot(self) -> float:
        """Time per output token after the first, (e2el - ttft) / (n - 1); NaN for a single token."""
        if self.n_tokens < 2:
            return math.nan
        return (self.e2el - self.ttft) / (self.n_tokens - 1)


def percentiles(values: Sequence[float], qs: Sequence[int] = (50, 90, 99), prefix: str = "") -> dict[str, float]:
    """The qs-th percentiles of `values` (NaN when empty), keyed like 'itl_p50_s'."""
    name = f"{prefix}_" if prefix else ""
    if len(values) == 0:
        return {f"{name}p{q}_s": math.nan for q in qs}
    return {f"{name}p{q}_s": float(np.percentile(values, q)) for q in qs}


def plot_timeline(ax, timestamps: Sequence[float], title: str) -> None:
    """One request's timeline from its token timestamps: the prefill bar, then one bar per decode step."""
    stamps = np.asarray(timestamps) * 1e3  # ms since the request started
    ax.broken_barh([(0, stamps[0])], (1, 0.8), color="C1", label=f"prefill (TTFT {stamps[0]:.1f} ms)")
    steps = list(zip(stamps[:-1], np.diff(stamps), strict=True))
    ax.broken_barh(steps, (0, 0.8), color=["C0", "C9"] * (len(steps) // 2 + 1), label="decode steps (ITL each)")
    ax.vlines(stamps, 0, 1.8, color="k", lw=0.5, alpha=0.5)
    ax.set_yticks([0.4, 1.4], ["decode", "prefill"])
    ax.set_xlabel("time since the request started (ms); a thin line = a token reached the host")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    plt.setp(ax.get_yticklabels(), fontsize=8)
