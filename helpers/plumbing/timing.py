"""Timing: warm up, synchronize, repeat, and report the median with its spread."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace

import torch
from torch.utils.benchmark import Timer

from .contention import Contention, watch
from .device import as_device, synchronize


@dataclass(frozen=True)
class Timing:
    """Seconds per call: median, quartiles and extremes over `runs` timed samples."""

    median: float
    q25: float
    q75: float
    min: float
    max: float
    runs: int
    round_mins: tuple[float, ...] = ()  # time_alternating: the fastest call of each round, in order
    contention: Contention | None = None  # what else ran while it was timed (benchmark, time_alternating)

    @property
    def iqr(self) -> float:
        """Interquartile range in seconds (q75 - q25)."""
        return self.q75 - self.q25

    @classmethod
    def from_times(cls, times: list[float]) -> Timing:
        """Summarize a list of per-call times in seconds."""
        if not times:
            raise ValueError("times must hold at least one measurement")
        q = statistics.quantiles(times, n=4, method="inclusive") if len(times) > 1 else [times[0]] * 3
        return cls(statistics.median(times), q[0], q[2], min(times), max(times), len(times))

    def __str__(self) -> str:
        busy = f"; busy: {', '.join(self.contention.reasons)}" if self.contention and self.contention.busy else ""
        return f"{format_seconds(self.median)} (IQR {format_seconds(self.iqr)}, n={self.runs}{busy})"


def format_seconds(seconds: float) -> str:
    """Format a duration with a readable unit: 1.23 s, 4.56 ms, 7.89 us."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def benchmark(
    fn: Callable[[], object],
    *,
    device: torch.device | str | None = None,
    warmup: int = 2,
    min_run_time: float = 0.2,
    min_runs: int = 5,
) -> Timing:
    """Time `fn()` with torch.utils.benchmark after `warmup` calls; returns median and spread in seconds."""
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if min_run_time <= 0:
        raise ValueError(f"min_run_time must be > 0 seconds, got {min_run_time}")
    if min_runs < 1:
        raise ValueError(f"min_runs must be >= 1, got {min_runs}")
    device = as_device(device)
    with watch() as window:  # what else ran meanwhile: reported with the timing, and read by the next self-check
        for _ in range(warmup):
            fn()
        synchronize(device)
        # Timer synchronizes the accelerator around each block; it defaults to 1 thread, so pass ours.
        timer = Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
        times = list(timer.blocked_autorange(min_run_time=min_run_time).times)
        while len(times) < min_runs:
            times.extend(timer.timeit(number=1).times)
    return replace(Timing.from_times(times), contention=window.contention)


def time_once(fn: Callable[[], object], *, device: torch.device | str | None = None) -> float:
    """Seconds for one call of `fn()`, synchronized: what a single cold measurement sees."""
    device = as_device(device)
    synchronize(device)
    start = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - start


def calls_per_round(seconds_per_call: float, min_round_s: float) -> int:
    """How many single timed calls fill at least min_round_s (cheap calls get more chances at a quiet moment)."""
    return min(1000, max(1, math.ceil(min_round_s / max(seconds_per_call, 1e-9))))


def time_alternating(fns: dict[Hashable, Callable[[], object]], *, device: torch.device | str | None = None,
                     rounds: int = 5, min_round_s: float = 0.05) -> dict[Hashable, Timing]:
    """Time several functions in turns, so that a change in the machine's background load falls on all alike.

    Each function is called once to warm up and once more to size its share of a round: enough single
    calls to fill `min_round_s`, re-aimed after each round at its fastest call so far. Then `rounds` rounds
    call every function in turn, each call timed on its own and synchronized. Compare the results' `.min`
    (the run least disturbed by other programs), or two results round by round with `round_ratio`: a
    neighbour's burst then lands on both sides of each ratio.
    """
    if not fns:
        raise ValueError("fns must hold at least one function to time")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if min_round_s <= 0:
        raise ValueError(f"min_round_s must be > 0 seconds, got {min_round_s}")
    device = as_device(device)
    calls = {}
    samples: dict[Hashable, list[float]] = {name: [] for name in fns}
    fastest: dict[Hashable, list[float]] = {name: [] for name in fns}
    with watch() as window:
        for name, fn in fns.items():
            fn()
            calls[name] = calls_per_round(time_once(fn, device=device), min_round_s)
        for _ in range(rounds):
            for name, fn in fns.items():
                times = [time_once(fn, device=device) for _ in range(calls[name])]
                samples[name].extend(times)
                fastest[name].append(min(times))
                # re-aimed at the fastest call so far: a slow first call (a neighbour's burst) must not leave
                # one function with fewer chances at a quiet moment than another
                calls[name] = calls_per_round(min(samples[name]), min_round_s)
    return {name: replace(Timing.from_times(times), round_mins=tuple(fastest[name]), contention=window.contention)
            for name, times in samples.items()}


def ratios_by_round(a_mins, b_mins) -> list[float]:
    """Each round's fastest call of a over b's; both must have timed the same rounds (in one run of turns)."""
    if not len(a_mins) or len(a_mins) != len(b_mins):
        raise ValueError("a and b must come from one run of turns that timed both in every round")
    return [x / y for x, y in zip(a_mins, b_mins, strict=True)]


def round_ratio(a: Timing, b: Timing) -> Timing:
    """a / b round by round (each round's fastest calls, from time_alternating), summarised like a timing."""
    return Timing.from_times(ratios_by_round(a.round_mins, b.round_mins))
