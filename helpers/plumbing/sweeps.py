"""Sweeps: time many sizes of a computation in turns, so background load bends no end of a curve."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import pandas as pd
import torch
from tqdm.auto import tqdm

from .contention import watch
from .device import as_device
from .memory import check_budget, measure_memory, record_oom
from .timing import Timing, calls_per_round, ratios_by_round, time_once
from .validate import positive_int


def sweep_round_ratio(a: pd.Series, b: pd.Series) -> float:
    """Median over the rounds of row a's fastest call over row b's, both rows from one interleaved_sweep."""
    return statistics.median(ratios_by_round(a["round_mins"], b["round_mins"]))


def _warm_up(row: dict, fn: Callable[[], object], device: torch.device, min_round_s: float) -> None:
    """First call under measure_memory (peak_bytes), second timed to size a round; an OOM marks the row.

    Memory is freed only after an OOM: a full garbage collection costs ~0.2 s in a kernel that has imported
    transformers, and the tensors of a call that succeeded are already freed when their last reference goes."""
    with record_oom(row, device), measure_memory(device) as mem:
        fn()
    if row["status"] == "ok":
        row.update(peak_bytes=mem.peak, number=calls_per_round(time_once(fn, device=device), min_round_s))


def _time_round(row: dict, fn: Callable[[], object], samples: list[float], device: torch.device,
                min_round_s: float) -> None:
    """One round: `number` single synchronized calls, then re-aim `number` at the fastest call so far."""
    with record_oom(row, device):
        times = [time_once(fn, device=device) for _ in range(row["number"])]
        samples.extend(times)
        row["round_mins"].append(min(times))
        row["number"] = calls_per_round(min(samples), min_round_s)


def interleaved_sweep(sizes: list[int], prepare: Callable[[int], dict[str, Callable[[], object]]],
                      device: torch.device | str | None = None, rounds: int = 5, min_round_s: float = 0.03,
                      key: str = "N", desc: str = "sweep",
                      peak_bytes: Callable[[int], int] | None = None) -> pd.DataFrame:
    """Time every function prepare(n) returns, for every size, in turns; what runs out of memory says 'OOM'.

    Each function is warmed up once under measure_memory (giving `peak_bytes`); then all of them are timed
    round-robin for `rounds` rounds, so that a change in the machine's background load falls on every size
    alike instead of bending one end of a curve. In each round a function is called `number` times (each
    call timed on its own, synchronized), enough to fill `min_round_s` at its fastest time so far. One row
    per (size, name) with the median, quartiles and fastest of its calls, and `round_mins`, the fastest call
    of each round in order: divide two rows' round by round (`sweep_round_ratio`) and a slow spell of the
    machine lands on both sides of each ratio. `peak_bytes(n)`, where given, is what a size is predicted to
    hold at its peak: a size past the memory budget is marked 'over budget'.
    """
    positive_int("rounds", rounds)
    device = as_device(device)
    rows, timed = [], []  # timed: (row, fn, per-call seconds)
    for n in tqdm(sizes, desc=f"{desc}: warm-up"):
        fns, inputs = {}, {key: n, "name": "inputs"}
        with record_oom(inputs, device):
            if peak_bytes is not None:
                check_budget(peak_bytes(n), f"{key} = {n}")
            fns = prepare(n)
        if inputs["status"] != "ok":
            rows.append(inputs)
        for name, fn in fns.items():
            rows.append({key: n, "name": name, "status": "ok", "round_mins": []})
            _warm_up(rows[-1], fn, device, min_round_s)
            timed.append((rows[-1], fn, []))
    with watch():  # what else ran meanwhile: the next self-check reads it
        for _ in tqdm(range(rounds), desc=f"{desc}: {rounds} rounds"):
            for row, fn, samples in timed:
                if row["status"] == "ok":
                    _time_round(row, fn, samples, device, min_round_s)
    for row, _, samples in timed:
        if row["status"] == "ok":
            timing = Timing.from_times(samples)
            row.update(median_s=timing.median, iqr_s=timing.iqr, min_s=timing.min, runs=timing.runs)
        row["round_mins"] = tuple(row.get("round_mins", ()))
    return pd.DataFrame(rows)
