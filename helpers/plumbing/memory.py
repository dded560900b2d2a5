"""Memory: how much a block of code adds, on the GPU allocator or in the CPU process."""

from __future__ import annotations

import gc
import mmap
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import psutil
import torch
from torch.profiler import ProfilerActivity, profile

from .device import as_device, synchronize
from .profile import by_profile, current_profile
from .seat import find_seat


@dataclass
class MemoryChange:
    """Bytes a block added: `current` (still held after it), `peak` (highest above the start)."""

    device: str
    source: str  # what was measured: "cuda allocator" or "process RSS (sampled)"
    current: int = 0
    peak: int = 0

    def __str__(self) -> str:
        return f"+{self.current / 2**20:.2f} MiB held, +{self.peak / 2**20:.2f} MiB peak ({self.source})"


def _rss() -> int:
    """Resident set size of this process in bytes."""
    return psutil.Process().memory_info().rss


@contextmanager
def measure_memory(device: torch.device | str | None = None, sample_every: float = 0.0005) -> Iterator[MemoryChange]:
    """Measure memory a block adds: CUDA allocator current/peak on GPU; sampled process RSS on CPU."""
    device = as_device(device)
    if device.type == "cuda":
        synchronize(device)
        change = MemoryChange(str(device), "cuda allocator")
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        yield change
        synchronize(device)
        change.current = torch.cuda.memory_allocated(device) - start
        change.peak = torch.cuda.max_memory_allocated(device) - start
        return
    change = MemoryChange(str(device), "process RSS (sampled)")
    gc.collect()  # garbage freed inside the block would hide what the block adds
    start = _rss()
    highest = [start]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            highest[0] = max(highest[0], _rss())
            time.sleep(sample_every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield change
    finally:
        synchronize(device)
        done.set()
        sampler.join()
        end = _rss()
        change.current = end - start
        change.peak = max(highest[0], end) - start


def tensor_bytes(*objects: object) -> int:
    """Bytes of every distinct tensor found in the arguments (tensors, lists, tuples, dicts)."""
    seen: set[int] = set()
    total = 0
    stack = list(objects)
    while stack:
        obj = stack.pop()
        if isinstance(obj, torch.Tensor):
            if obj.data_ptr() not in seen:
                seen.add(obj.data_ptr())
                total += obj.nbytes
        elif isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            stack.extend(obj)
    return total


def memory_budget_bytes() -> int:
    """Bytes one chapter may hold: 4 GiB in `quick`, 8 GiB in `cpu` (a 16 GB laptop), 32 GiB in `full`; less on
    a seat that cannot give that much: what this process holds plus what the seat still has free (its cgroup
    memory limit's headroom, or the host's available memory), of which the budget takes SEAT_SHARE."""
    seat_bytes = _rss() + find_seat().memory_available
    return int(min(by_profile(quick=4, cpu=8, full=32) * 2**30, SEAT_SHARE * seat_bytes))


SEAT_SHARE = 0.8  # the rest stays free for the kernel's own growth, the server or ranks it starts, the OS


class OverBudget(MemoryError):
    """A size whose bytes would take the process past the chapter's memory budget: skipped, like an OOM."""


def check_budget(nbytes: int, what: str = "this size") -> None:
    """Raise OverBudget if this process plus `nbytes` more would pass memory_budget_bytes()."""
    held, budget = _rss(), memory_budget_bytes()
    if held + nbytes > budget:
        raise OverBudget(f"{what} needs {nbytes / 2**30:.2f} GiB more while the process holds {held / 2**30:.2f} GiB: "
                         f"past the {current_profile()} profile's budget of {budget / 2**30:.0f} GiB")


def is_oom(error: BaseException) -> bool:
    """True for an out-of-memory error from any device (torch.OutOfMemoryError or a RuntimeError saying so)."""
    if isinstance(error, (torch.OutOfMemoryError, MemoryError)):
        return True
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def free_memory(device: torch.device | str | None = None) -> None:
    """Drop unreachable tensors and hand cached GPU blocks back after an OOM or a large size."""
    gc.collect()
    if as_device(device).type == "cuda":
        torch.cuda.empty_cache()


@contextmanager
def record_oom(row: dict, device: torch.device | str | None = None) -> Iterator[dict]:
    """Run the block; if it runs out of memory, set row["status"] = "OOM", free memory and carry on.

    The one way the lab's sweeps survive a size that does not fit: `with record_oom(row): row["s"] = ...`.
    A size that `check_budget` refuses is marked "over budget" the same way. Any other error is raised as
    usual; a block that finishes leaves `row["status"]` as "ok"."""
    row.setdefault("status", "ok")
    try:
        yield row
    except Exception as error:  # noqa: BLE001 - only OOM is tolerated, the rest is re-raised
        if not is_oom(error):
            raise
        row["status"] = "over budget" if isinstance(error, OverBudget) else "OOM"
        free_memory(device)


@dataclass(frozen=True)
class Allocations:
    """Bytes of PyTorch CPU tensors a call allocated: still `held` after it, and its `peak` above the start."""

    held: int
    peak: int


@contextmanager
def quiet_stderr() -> Iterator[None]:
    """Send the process's stderr (file descriptor 2, C++ libraries included) to /dev/null inside the block.

    torch.profiler's Kineto prints `profiler_start` / `profiler_stop` lines there, which a notebook shows
    as a red box."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def cpu_allocations(fn: Callable[[], object]) -> tuple[object, Allocations]:
    """Run `fn()` under torch.profiler(profile_memory=True); return its result and the CPU bytes it allocated.

    Exact for tensors PyTorch allocates, unlike the process's resident memory, which reuses freed pages."""
    with quiet_stderr(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    changes = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events() if e.self_cpu_memory_usage)
    running = np.cumsum([0] + [change for _, change in changes])
    return result, Allocations(held=int(running[-1]), peak=int(running.max()))


def minor_page_faults() -> int | None:
    """Minor page faults this process has taken so far, or None where the OS does not count them (Windows).

    A minor fault is the first touch of a page the process was given but that is not yet in memory: the
    OS finds a page, zeroes it and maps it. Fresh large allocations on a CPU pay one per page."""
    try:
        import resource  # here: a Unix-only module (Windows has none)
    except ImportError:
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def page_fault_seconds(n_bytes: int = 64 * 2**20, repeats: int = 3) -> float | None:
    """Seconds per minor page fault here (median of `repeats`), or None where faults are not counted.

    Fresh anonymous memory written one byte per page, so each write faults a page in."""
    if minor_page_faults() is None:
        return None
    times = []
    for _ in range(repeats):
        buffer = mmap.mmap(-1, n_bytes)
        pages = np.frombuffer(buffer, dtype=np.uint8)[::mmap.PAGESIZE]
        before, start = minor_page_faults(), time.perf_counter()
        pages[:] = 1
        seconds, faults = time.perf_counter() - start, minor_page_faults() - before
        del pages
        buffer.close()
        times.append(seconds / max(faults, 1))
    return float(np.median(times))
