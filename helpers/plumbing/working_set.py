"""A working set past the cache: how much memory a probe must stream so that it times main memory, not a cache.

Every probe that should stream from memory (rotating weights, rotating cache layers, dequantising many
copies) sizes itself here, from an *effective* cache size measured on this machine: read bandwidth against
buffer size, and the size past which it has settled to main memory's rate. The size `/sys` reports is only
a hint: in a VM it can be the host's whole L3 (hundreds of MiB shared with other tenants), far more than
this process gets. No working set grows past a share of the memory that is free, nor past the profile's
memory budget; when one is capped it says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from .device import as_device, device_name, synchronize
from .memory import memory_budget_bytes
from .results import lab_dir, measured_once, slug
from .seat import find_seat
from .timing import calls_per_round, time_once

TEST_CACHE_ENV = "LAB_TEST_CACHE_BYTES"  # tests only: fake the effective cache size (bytes) to check the sizing
FREE_SHARE = 0.25  # the most of the free memory one working set may take
SETTLED = 1.5  # a size whose read rate is within this factor of main memory's is served by main memory
CACHE_VERSION = 1


def working_set_limit(device: torch.device | str | None = None) -> int:
    """The most one working set may take: an eighth of the chapter's budget, a quarter of the free memory.

    An eighth, because a chapter can hold a working set more than once (fp32 weights beside their int8 copies)
    on top of a model and the calibration's probes."""
    device = as_device(device)
    if device.type == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        free = find_seat().memory_available  # a cgroup limit's headroom where that is tighter than the host
    return int(min(FREE_SHARE * free, memory_budget_bytes() / 8))


def reported_cache_bytes(device: torch.device | str | None = None) -> int | None:
    """The last-level cache the system reports (CPU L3 from /sys, GPU L2 from the driver); None if unknown.

    A hint only: a VM may report the host's whole cache, shared with every other tenant."""
    device = as_device(device)
    if device.type == "cuda":
        return getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)
    for index in (3, 2):
        try:
            text = open(f"/sys/devices/system/cpu/cpu0/cache/index{index}/size").read().strip()
        except OSError:
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    return None


@dataclass(frozen=True)
class CacheSize:
    """Read bandwidth against buffer size, and the effective cache it shows.

    `cache_bytes` is the largest buffer still read faster than main memory (SETTLED x its rate);
    `settled` is False when even the largest buffer the memory limit allowed had not slowed to that rate."""

    device: str
    sizes: tuple[int, ...]  # buffer bytes, ascending
    read_rates: tuple[float, ...]  # bytes/s, the fastest of every round at each size
    memory_rate: float  # bytes/s of main memory: the rate at the largest sizes
    cache_bytes: int
    settled: bool
    reported_bytes: int | None  # /sys or the driver: a hint
    source: str = "measured"  # or "test override" (LAB_TEST_CACHE_BYTES)
    version: int = CACHE_VERSION

    def __str__(self) -> str:
        hint = f"{self.reported_bytes / 2**20:,.0f} MiB" if self.reported_bytes else "nothing"
        settled = "" if self.settled else " (at least: the largest buffer allowed was still served by a cache)"
        return (f"effective cache {self.cache_bytes / 2**20:,.0f} MiB{settled}; main memory "
                f"{self.memory_rate / 1e9:,.1f} GB/s read; the system reports {hint} ({self.source})")


def sweep_sizes(device: torch.device | str | None = None) -> list[int]:
    """Buffer sizes from 1 MiB, doubling, to 4x the reported cache (at least 256 MiB), within the limit."""
    device = as_device(device)
    top = min(max(4 * (reported_cache_bytes(device) or 0), 256 * 2**20), working_set_limit(device))
    return [2**20 * 2**k for k in range(31) if 2**20 * 2**k <= top]


def read_rates(sizes: list[int], device: torch.device, rounds: int = 3, min_round_s: float = 0.02) -> list[float]:
    """Bytes/s of src.sum() at each size: the fastest call over `rounds` rounds that visit every size in turn."""
    buffers = [torch.ones(n // 4, dtype=torch.float32, device=device) for n in sizes]
    best = [0.0] * len(sizes)
    for _ in range(rounds):
        for i, src in enumerate(buffers):
            calls = calls_per_round(time_once(src.sum, device=device), min_round_s)
            best[i] = max(best[i], src.nbytes / min(time_once(src.sum, device=device) for _ in range(calls)))
    synchronize(device)
    return best


def effective_cache(sizes: list[int], rates: list[float]) -> tuple[int, float, bool]:
    """(cache bytes, main memory's rate, settled) from read rates against ascending buffer sizes.

    Rates only fall as buffers grow, so a dip below a larger size's rate is a disturbed probe: each size
    keeps the best rate of any size at least as large. Main memory's rate is that of the largest size."""
    if len(sizes) < 2 or len(sizes) != len(rates):
        raise ValueError(f"sizes and rates must be two or more matching values, got {len(sizes)} and {len(rates)}")
    floor = np.maximum.accumulate(np.asarray(rates, dtype=float)[::-1])[::-1]
    memory = float(floor[-1])
    faster = [n for n, rate in zip(sizes, floor, strict=True) if rate > SETTLED * memory]
    if not faster:  # no size ran faster than the largest: a disturbed sweep, or a cache under the smallest size
        return sizes[0], memory, False
    return faster[-1], memory, faster[-1] <= sizes[-1] // 4


def measure_cache_size(device: torch.device | str | None = None, refresh: bool = False) -> CacheSize:
    """This machine's effective last-level cache, measured once (about two seconds) and kept in lab_dir()."""
    device = as_device(device)
    override = os.environ.get(TEST_CACHE_ENV)
    if override:
        faked = int(override)
        return CacheSize(device_name(device), (), (), 0.0, faked, True, reported_cache_bytes(device), "test override")
    path = lab_dir() / f"cache-size-{slug(device_name(device))}.json"

    def load(data: dict) -> CacheSize | None:
        if data.get("version") != CACHE_VERSION:
            return None
        return CacheSize(**{**data, "sizes": tuple(data["sizes"]), "read_rates": tuple(data["read_rates"])})

    def measure() -> CacheSize:
        sizes = sweep_sizes(device)
        rates = read_rates(sizes, device)
        cache, memory, settled = effective_cache(sizes, rates)
        reported, source = reported_cache_bytes(device), "measured"
        if not settled and reported and reported > cache:  # sized from the hint, the safer side for a working set
            cache, source = min(reported, sizes[-1]), "reported (the sweep did not find the cache's end)"
        return CacheSize(device_name(device), tuple(sizes), tuple(rates), memory, cache, settled, reported, source)

    return measured_once(path, measure, "the effective cache", load, refresh)


@dataclass(frozen=True)
class WorkingSet:
    """Bytes a probe streams through: `wanted` (factor x the effective cache), `nbytes` (what the limit allows)."""

    nbytes: int
    wanted: int
    cache_bytes: int
    limit: int

    @property
    def capped(self) -> bool:
        """True when the memory limit cut the working set below what was wanted."""
        return self.nbytes < self.wanted

    @property
    def past_cache(self) -> bool:
        """True when the working set is at least twice the effective cache: it streams from main memory."""
        return self.nbytes >= 2 * self.cache_bytes

    def __str__(self) -> str:
        text = f"{self.nbytes / 2**20:,.0f} MiB working set ({self.nbytes / self.cache_bytes:.1f}x the effective cache"
        if self.capped:
            text += f"; capped by the memory limit, {self.limit / 2**20:,.0f} MiB, from {self.wanted / 2**20:,.0f} MiB"
        return text + ")"


def working_set(factor: float = 4, device: torch.device | str | None = None, at_least: int = 0) -> WorkingSet:
    """A working set `factor` x this machine's effective cache (and at least `at_least` bytes), within the limit."""
    if factor <= 0:
        raise ValueError(f"factor must be > 0, got {factor}")
    device = as_device(device)
    cache = measure_cache_size(device).cache_bytes
    wanted = max(int(factor * cache), int(at_least))
    limit = working_set_limit(device)
    return WorkingSet(min(wanted, limit), wanted, cache, limit)


def copies_past_cache(item_bytes: int, factor: float = 4, device: torch.device | str | None = None) -> int:
    """How many copies of an `item_bytes` object make a working set `factor` x the effective cache (at least 2)."""
    if item_bytes <= 0:
        raise ValueError(f"item_bytes must be > 0, got {item_bytes}")
    return max(2, working_set(factor, device).nbytes // item_bytes)
