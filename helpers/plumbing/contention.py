"""Contention: what else took the machine while the lab was timing something.

On a shared server (a course's JupyterHub node, a laptop with a build running) another process's burst can
make a true lesson look false. `watch()` measures, around a timed block: the CPU time the machine gave other
processes (from /proc/stat, less this process and its children), time this seat's cgroup was throttled by
its CPU quota, time the hypervisor stole, runnable tasks of other processes, and on a GPU other compute
processes. `benchmark`, `time_alternating`, the sweeps and the calibration's probes run under it, and in a
notebook every cell does (`watch_cells`); a self-check reads what was measured since the last check
(`recent()`), the way pyperf warns that a result is unstable. Linux only: elsewhere every reading is 0
(nothing measured, nothing blamed)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TypeVar

import psutil

from .seat import cgroup_dirs

# Thresholds, set here and nowhere else: past any of them a window counts as busy.
OTHERS_BUSY = 0.25  # other processes took over a quarter of the machine's CPU time
THROTTLED_BUSY = 0.10  # the seat's CPU quota held it back for over a tenth of the wall time
STEAL_BUSY = 0.10  # the hypervisor gave over a tenth of the machine's CPU time to other guests
SPEED_MOVED = 0.25  # a reference timing, repeated between a fit and the run it predicts, moved over a quarter
MIN_WINDOW_S = 0.1  # /proc/stat counts CPU time in ticks of 10 ms: shorter windows cannot show a share
T = TypeVar("T")
TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # /proc/stat counts in these


@dataclass
class Contention:
    """What else ran while something was timed, summed over one or more windows."""

    wall_s: float = 0.0
    own_cpu_s: float = 0.0  # this process and its children
    others_cpu_s: float = 0.0  # every other process on the machine
    machine_cpus: int = field(default_factory=lambda: os.cpu_count() or 1)
    throttled_s: float = 0.0  # held back by the cgroup's CPU quota
    steal_s: float = 0.0  # taken by the hypervisor
    others_runnable: int = 0  # the most runnable threads of other processes seen at a window's end
    gpu_others: int = 0  # the most other compute processes seen on the GPU
    worst_others_share: float = 0.0  # the largest others' share of any one window summed here (0.1 s or longer)
    speed_moved: float = 0.0  # this machine's own speed between a fit and a run: slowest / fastest reference - 1

    @property
    def others_share(self) -> float:
        """Share of the machine's CPU time that other processes used (0 to 1)."""
        return min(1.0, self.others_cpu_s / (self.wall_s * self.machine_cpus)) if self.wall_s else 0.0

    @property
    def throttled_share(self) -> float:
        """Share of the wall time the seat's quota held this process back."""
        return min(1.0, self.throttled_s / self.wall_s) if self.wall_s else 0.0

    @property
    def steal_share(self) -> float:
        """Share of the machine's CPU time the hypervisor gave to other guests."""
        return min(1.0, self.steal_s / (self.wall_s * self.machine_cpus)) if self.wall_s else 0.0

    @property
    def reasons(self) -> list[str]:
        """What made this window busy, in words (empty when quiet)."""
        found = []
        if self.speed_moved > SPEED_MOVED:
            found.append(f"this machine's own speed moved {self.speed_moved:.0%} (one reference timed twice: at a "
                         "fit and around the run it predicts)")
        if self.wall_s < MIN_WINDOW_S:
            return found + ([f"{self.gpu_others} other process(es) computed on the GPU"] if self.gpu_others else [])
        others = max(self.others_share, self.worst_others_share)  # one disturbed timing is enough
        if others > OTHERS_BUSY:
            found.append(f"other processes used {others:.0%} of the machine's CPU")
        if self.throttled_share > THROTTLED_BUSY:
            found.append(f"the CPU quota throttled this seat {self.throttled_share:.0%} of the time")
        if self.steal_share > STEAL_BUSY:
            found.append(f"the hypervisor stole {self.steal_share:.0%} of the CPU")
        if self.gpu_others:
            found.append(f"{self.gpu_others} other process(es) computed on the GPU")
        return found

    @property
    def busy(self) -> bool:
        """True when any reading passed its threshold (OTHERS_BUSY, THROTTLED_BUSY, STEAL_BUSY, SPEED_MOVED, a GPU
        neighbour)."""
        return bool(self.reasons)

    def __add__(self, other: Contention) -> Contention:
        summed = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        summed.update(machine_cpus=max(self.machine_cpus, other.machine_cpus),
                      others_runnable=max(self.others_runnable, other.others_runnable),
                      gpu_others=max(self.gpu_others, other.gpu_others),
                      worst_others_share=max(self.worst_others_share, other.worst_others_share),
                      speed_moved=max(self.speed_moved, other.speed_moved))
        return Contention(**summed)

    def as_dict(self) -> dict[str, float]:
        """The readings and shares, for logs and exported results."""
        return {"wall_s": round(self.wall_s, 3), "others_share": round(self.others_share, 3),
                "throttled_share": round(self.throttled_share, 3), "steal_share": round(self.steal_share, 3),
                "worst_others_share": round(self.worst_others_share, 3),
                "others_runnable": self.others_runnable, "gpu_others": self.gpu_others,
                "own_cpu_s": round(self.own_cpu_s, 3), "speed_moved": round(self.speed_moved, 3)}

    def __str__(self) -> str:
        if not self.wall_s:
            return "contention: nothing timed"
        return (f"while timing {self.wall_s:.1f} s: others {self.others_share:.0%} of the machine's CPU, "
                f"throttled {self.throttled_share:.0%}, steal {self.steal_share:.0%}, "
                f"{self.others_runnable} other runnable"
                + (f", {self.gpu_others} on the GPU" if self.gpu_others else ""))


def _machine_ticks() -> tuple[float, float]:
    """(busy, steal) CPU seconds of the whole machine since boot, from /proc/stat's first line."""
    try:
        with open("/proc/stat") as f:
            values = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) / TICK, steal / TICK


def _own_cpu() -> float:
    """CPU seconds of this process, the children it waited for, and the children still running."""
    me = psutil.Process()
    times = me.cpu_times()
    total = times.user + times.system + times.children_user + times.children_system
    try:
        for child in me.children(recursive=True):
            try:
                t = child.cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
    except psutil.Error:
        pass
    return total


def _throttled() -> float:
    """Seconds the cgroup CPU quota held this process back, the most over its cgroup and parents."""
    most = 0.0
    for d in cgroup_dirs("cpu"):  # read each time: a process can be moved to another cgroup
        try:
            stat = dict(line.split()[:2] for line in (d / "cpu.stat").read_text().splitlines())
        except (OSError, ValueError):
            continue
        if "throttled_usec" in stat:  # cgroup v2
            most = max(most, int(stat["throttled_usec"]) / 1e6)
        elif "throttled_time" in stat:  # cgroup v1, nanoseconds
            most = max(most, int(stat["throttled_time"]) / 1e9)
    return most


def _others_runnable() -> int:
    """Runnable threads on the machine now, less this process's own running threads."""
    try:
        with open("/proc/stat") as f:
            running = next(int(line.split()[1]) for line in f if line.startswith("procs_running"))
        own = 0
        for task in Path("/proc/self/task").iterdir():
            with open(task / "stat") as f:
                own += f.read().rsplit(")", 1)[1].split()[0] == "R"
    except (OSError, StopIteration, ValueError):
        return 0
    return max(0, running - own)


_gpu_seen = (-1e9, 0)  # (when, count): nvidia-smi takes ~0.1 s, so a count is reused for GPU_TTL_S
GPU_TTL_S = 5.0


def _gpu_others() -> int:
    """Other compute processes on this process's GPU (0 off CUDA), read at most every GPU_TTL_S seconds."""
    global _gpu_seen
    from .device import pick_device  # here: only a CUDA device has GPU neighbours to count
    from .seat import gpu_processes

    if time.monotonic() - _gpu_seen[0] < GPU_TTL_S:
        return _gpu_seen[1]
    device = pick_device()
    count = len(gpu_processes(device) or []) if device.type == "cuda" else 0
    _gpu_seen = (time.monotonic(), count)
    return count


def sample() -> tuple[float, float, float, float, float]:
    """(wall, machine busy, steal, own CPU, throttled) seconds now."""
    busy, steal = _machine_ticks()
    return time.perf_counter(), busy, steal, _own_cpu(), _throttled()


def between(start: tuple, end: tuple, gpu_others: int = 0) -> Contention:
    """The contention between two `sample()`s."""
    wall, busy, steal, own, throttled = (b - a for a, b in zip(start, end, strict=True))
    found = Contention(wall_s=wall, own_cpu_s=own, others_cpu_s=max(0.0, busy - own), throttled_s=throttled,
                       steal_s=steal, others_runnable=_others_runnable(), gpu_others=gpu_others)
    if wall >= MIN_WINDOW_S:  # the share of this window alone, kept when windows are summed
        found.worst_others_share = found.others_share
    return found


_recent = Contention()  # summed over the windows since the last self-check
_last = Contention()  # what the last self-check read: the next one reads it too if nothing was timed since
_baseline = Contention()  # the busy measurements this process kept and predicts from (ceilings, calibration)
_depth = 0  # watch() inside watch() is counted once, by the outer window


@dataclass
class Window:
    """What `watch()` yields: its `contention` is filled in when the block ends."""

    contention: Contention = field(default_factory=Contention)


@contextmanager
def watch() -> Iterator[Window]:
    """Measure the contention of the block; it is also added to what the next self-check reads (`recent()`)."""
    global _recent, _depth
    window = Window()
    gpu_others = _gpu_others()
    start = sample()
    _depth += 1
    try:
        yield window
    finally:
        _depth -= 1
        window.contention = between(start, sample(), max(gpu_others, _gpu_others()))
        if _depth == 0:
            _recent = _recent + window.contention


def recent() -> Contention:
    """The contention of every timing watched since the last self-check, and of the notebook cells run since
    (`watch_cells`); or, when less than MIN_WINDOW_S ran since, what the last check read as well: several
    checks can judge one measurement."""
    global _recent, _last, _cell_start
    if _cell_start is not None:  # the cell running now, up to this check
        now = sample()
        _recent, _cell_start = _recent + between(_cell_start, now, _gpu_others()), now
    if _recent.wall_s < MIN_WINDOW_S:  # nothing measurable ran since (a check right after another)
        return _last + _recent
    _last, _recent = _recent, Contention()
    return _last


_cell_start: tuple | None = None  # sample() when the running notebook cell started


def _cell_started(*_) -> None:
    global _cell_start
    _cell_start = sample()


def _cell_finished(*_) -> None:
    global _recent, _cell_start
    if _cell_start is not None:
        _recent, _cell_start = _recent + between(_cell_start, sample(), _gpu_others()), None


def watch_cells() -> bool:
    """In IPython (a notebook's kernel), measure the contention of every cell, so that a self-check also sees
    timings no helper watched (a cell's own loop, a server's requests). Once per kernel; False outside IPython."""
    try:
        from IPython import get_ipython  # here: only a notebook kernel has cells to watch
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    if _cell_started not in shell.events.callbacks["pre_run_cell"]:
        shell.events.register("pre_run_cell", _cell_started)
        shell.events.register("post_run_cell", _cell_finished)
    return True


def baseline() -> Contention:
    """The contention of the measurements kept from a busy moment that this process predicts from."""
    return _baseline


def kept_while_busy(found: Contention) -> None:
    """Record that a measurement taken while busy is used from now on in this process (not cached): every
    later check's evidence then includes it, since predictions rest on it."""
    global _baseline
    _baseline = _baseline + found


def measure_now(seconds: float = 0.5) -> Contention:
    """The contention of the next `seconds` while this process sleeps: what the rest of the machine is doing."""
    start = sample()
    time.sleep(seconds)
    return between(start, sample(), _gpu_others())


def measure_quietly(measure: Callable[[], T], what: str, tries: int = 2) -> tuple[T, Contention]:
    """`measure()` under watch(), once more (up to `tries` in all) while the machine was busy; returns the last
    result and its contention. A measurement that is kept for later (a cache file) should be kept only when
    that contention is quiet: one neighbour's burst must not bend every later chapter's predictions."""
    for attempt in range(1, tries + 1):
        with watch() as window:
            result = measure()
        if not window.contention.busy:
            break
        print(f"{what}: measured while this seat was busy ({'; '.join(window.contention.reasons)})"
              + (", measuring again" if attempt < tries else ": used now, not cached; run it again when quieter"))
    if window.contention.busy:
        kept_while_busy(window.contention)
    return result, window.contention


def speed_change(reference_s: Sequence[float]) -> Contention:
    """How far this machine's own speed moved while a prediction waited for its run: the same reference timing
    taken at the fit and again around the run (seconds each). A VM's speed can swing with nothing else visible
    running; past SPEED_MOVED a check that compares the two cannot judge the prediction."""
    if len(reference_s) < 2 or min(reference_s) <= 0:
        raise ValueError(f"reference_s needs two or more timings > 0, got {list(reference_s)!r}")
    return Contention(speed_moved=max(reference_s) / min(reference_s) - 1)
