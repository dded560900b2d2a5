"""Chapter 9, prefill meets decode: a workload of short requests decoding while long prompts arrive at known
times, what the long ones do to the short ones (stalls, inter-token latency, TTFT), and a step cost fitted on
the engine's own recorded steps."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ....plumbing.validate import non_negative, positive, positive_int
from ...latency import percentiles
from ...step_time import LinearStepCost, PackedStepCost  # noqa: F401  (PackedStepCost: here before step_time)
from ..requests import Request, Served


def stall_workload(n_short: int, short_prompt: int, short_output: int, long_prompts: Sequence[int],
                   long_at: Sequence[float], long_output: int = 4, spacing_s: float = 0.0) -> list[Request]:
    """`n_short` requests arriving `spacing_s` apart (ids 0..n_short-1), then one long prompt at each time in
    `long_at` (ids n_short, n_short + 1, ...)."""
    for name, value in (("n_short", n_short), ("short_prompt", short_prompt), ("short_output", short_output),
                        ("long_output", long_output)):
        positive_int(name, value)
    if len(long_prompts) != len(long_at) or not long_prompts:
        raise ValueError(f"long_prompts and long_at must pair up and not be empty: {long_prompts}, {long_at}")
    spacing_s = non_negative("spacing_s", spacing_s)
    shorts = [Request(i, i * spacing_s, short_prompt, short_output) for i in range(n_short)]
    longs = [Request(n_short + k, float(positive("long_at", t)), positive_int("long_prompts", p), long_output)
             for k, (p, t) in enumerate(zip(long_prompts, long_at, strict=True))]
    return shorts + longs


def interference_metrics(served: Sequence[Served], long_ids: Sequence[int]) -> dict[str, float]:
    """What the long prompts do: p50/p99 inter-token latency of the other requests, TTFT of the long ones (s)."""
    others = [s for s in served if s.request.id not in long_ids and s.ok]
    longs = [s for s in served if s.request.id in long_ids and s.ok and s.token_times]
    gaps = [g for s in others for g in s.itl]
    return {**percentiles(gaps, (50, 99), prefix="itl"),
            "itl_max_s": max(gaps, default=np.nan),
            "long_ttft_s": float(np.mean([s.ttft for s in longs])) if longs else np.nan,
            "failed": sum(not s.ok for s in served)}


def stalls(served: Sequence[Served], long_ids: Sequence[int]) -> list[float]:
    """For each long request: the longest gap between two tokens of any other request that spans a moment between
    its arrival and its first token (NaN if none does): the stall the running requests saw."""
    out = []
    for long in (s for s in served if s.request.id in long_ids):
        start = long.request.arrival
        end = long.token_times[0] if long.token_times else np.inf
        spans = [b - a for s in served if s.request.id not in long_ids
                 for a, b in zip(s.token_times[:-1], s.token_times[1:], strict=True) if b > start and a < end]
        out.append(max(spans, default=np.nan))
    return out


def step_periods(steps: pd.DataFrame) -> np.ndarray:
    """Each recorded step's seconds from its start to the next one's (the last step has none): the forward and
    the engine's own work after it. A wait for the next arrival is no part of a step: a gap after a forward
    longer than 5x the median gap is cut to the median."""
    seconds = steps["seconds"].to_numpy()[:-1]
    gaps = steps["start_s"].diff().shift(-1).to_numpy()[:-1] - seconds
    typical = np.median(gaps)
    return seconds + np.where(gaps > 5 * typical, typical, gaps)


def engine_step_cost(steps: pd.DataFrame) -> PackedStepCost:
    """A PackedStepCost least-squares fitted on an engine's recorded forwards (`step_periods`), with no part
    below 0: a part that fits negative is set to 0 and the others refitted without it. With no `kv_tokens`
    column, no per-score term."""
    fitted = steps.iloc[:-1]  # the last step has no period
    columns = [np.ones(len(fitted)), fitted["tokens"].to_numpy(float), fitted["sequences"].to_numpy(float)]
    if "kv_tokens" in steps:
        columns.append(fitted["tokens"].to_numpy(float) * fitted["kv_tokens"].to_numpy(float))
    if len(fitted) < len(columns):
        raise ValueError(f"steps must hold at least {len(columns) + 1} recorded steps to fit {len(columns)} "
                         f"parts, got {len(steps)}")
    design, periods = np.column_stack(columns), step_periods(steps)
    coef, kept = np.zeros(len(columns)), list(range(len(columns)))
    while kept:  # drop the most negative part and refit the rest, until none is negative
        coef[:] = 0.0
        coef[kept], *_ = np.linalg.lstsq(design[:, kept], periods, rcond=None)
        if coef.min() >= 0:
            break
        kept.remove(int(np.argmin(coef)))
    fixed, per_token, per_sequence, *per_score = (float(c) for c in coef)
    return PackedStepCost(fixed, per_token, per_sequence_s=per_sequence, per_score_s=per_score[0] if per_score else 0.0)


def plot_token_gaps(ax, served: Sequence[Served], long_ids: Sequence[int], predicted: dict[int, float] | None = None,
                    title: str = "") -> None:
    """Every gap between two tokens of the short requests, drawn at the time it ended (ms); each long prompt's
    arrival and first token as lines; `predicted` (long id -> stall, s) as a bar over its arrival."""
    for s in served:
        if s.request.id not in long_ids and len(s.token_times) > 1:
            ax.plot(np.array(s.token_times[1:]) * 1e3, np.diff(s.token_times) * 1e3, ".", ms=3, color="tab:blue")
    for k, s in enumerate(x for x in served if x.request.id in long_ids):
        label = f"long prompt {s.request.prompt_len}"
        ax.axvline(s.request.arrival * 1e3, color=f"C{k + 1}", ls="--", lw=1, label=f"{label} arrives")
        if s.token_times:
            ax.axvline(s.token_times[0] * 1e3, color=f"C{k + 1}", ls=":", lw=1, label=f"{label}: first token")
        if predicted and s.request.id in predicted:
            start, stall = s.request.arrival, predicted[s.request.id]
            ax.hlines(stall * 1e3, start * 1e3, (start + stall) * 1e3, color=f"C{k + 1}", lw=3,
                      label="predicted stall (as long as it lasts)")
    ax.set_xlabel("time from the first request (ms)")
    ax.set_ylabel("gap before this token (ms)")
    ax.set_title(title, fontsize=9)
    ax.grid(True, alpha=0.3)


def step_price_error(steps: pd.DataFrame, cost: LinearStepCost) -> float:
    """How far a fitted cost prices the steps an engine really ran: the sum of its prices over the sum of the
    steps' periods (`step_periods`), minus 1. The schedule is taken as run: only the price is tested."""
    return float(np.sum(cost.price(steps)[:-1]) / step_periods(steps).sum() - 1)
