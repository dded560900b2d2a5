"""Chapter 0, this machine's ceilings: copy and read bandwidth and matmul FLOP/s, measured once and cached.

Units: FLOP/s and bytes/s in decimal units (TFLOP/s = 1e12, GB/s = 1e9), as spec sheets give them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import torch

from ...plumbing.contention import Contention, speed_change
from ...plumbing.device import as_device, default_dtype, device_name, synchronize
from ...plumbing.profile import by_profile
from ...plumbing.results import lab_dir, measured_once, slug
from ...plumbing.timing import benchmark, time_alternating
from ...plumbing.validate import positive_int
from ...plumbing.working_set import working_set
from ..formulas import ridge_point


def default_stream_bytes(device: torch.device) -> int:
    """A buffer that streams from main memory: 4x the effective cache, at least 256 MiB (1 GiB on a GPU)."""
    return working_set(4, device, at_least=(1024 if device.type == "cuda" else 256) * 2**20).nbytes


def measure_bandwidth(device: torch.device | str | None = None, nbytes: int | None = None) -> float:
    """Copy bandwidth in bytes/s: the fastest of repeated large copies, counting bytes read + written.

    On a CPU a copy also reads each destination line before writing it (write-allocate): it moves about 3
    bytes for the 2 counted, so this can sit below `measure_read_bandwidth`. Caches serve buffers that fit
    them, so the default buffer is several times this machine's effective cache (`working_set`)."""
    device = as_device(device)
    nbytes = nbytes or default_stream_bytes(device)
    if nbytes < 2**20:
        raise ValueError(f"nbytes must be at least 1 MiB (2**20), got {nbytes}; caches serve copies up to tens "
                         "of MB, so measure main memory with a buffer several times the cache")
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    timing = benchmark(lambda: dst.copy_(src), device=device)
    return 2 * src.nbytes / timing.min  # a ceiling: the best the device reached


def measure_read_bandwidth(device: torch.device | str | None = None, nbytes: int | None = None) -> float:
    """Read-only bandwidth in bytes/s: the fastest of repeated sums over a large buffer (bytes read only).

    The ceiling for kernels that mostly read, such as decode's matrix-vector products streaming weights."""
    device = as_device(device)
    nbytes = nbytes or default_stream_bytes(device)
    if nbytes < 2**20:
        raise ValueError(f"nbytes must be at least 1 MiB (2**20), got {nbytes}; caches serve reads up to tens "
                         "of MB, so measure main memory with a buffer several times the cache")
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    timing = benchmark(lambda: src.sum(), device=device)
    return src.nbytes / timing.min


def matmul_ceiling_shapes(device: torch.device) -> list[tuple[int, int, int]]:
    """The (m, k, n) products the ceiling is measured on: squares, and the model-shaped ones the lab runs."""
    if device.type == "cuda":
        return [(8192, 8192, 8192), (4096, 4096, 4096), (2048, 1280, 5120), (4096, 1280, 5120)]
    square = by_profile(quick=1024, cpu=2048, full=2048)
    return [(square, square, square), (512, 768, 3072), (1024, 768, 3072), (1024, 3072, 768)]


def measure_matmul_flops(dtype: torch.dtype | None = None, device: torch.device | str | None = None,
                         n: int | None = None, shape: tuple[int, int, int] | None = None) -> float:
    """FLOP/s of the fastest of repeated (m x k) @ (k x n) matmuls on random data (n x n x n by default)."""
    device = as_device(device)
    dtype = dtype or default_dtype(device)
    if shape is None:
        if n is None:
            n = 8192 if device.type == "cuda" else by_profile(quick=1024, cpu=2048, full=2048)
        if n < 16:
            raise ValueError(f"n must be >= 16, got {n}")
        shape = (n, n, n)
    m, k, n = (positive_int(name, v) for name, v in zip("mkn", shape, strict=True))
    a = torch.randn(m, k, device=device, dtype=dtype)
    b = torch.randn(k, n, device=device, dtype=dtype)
    timing = benchmark(lambda: a @ b, device=device)
    return 2 * m * k * n / timing.min  # a ceiling: the best the device reached


def matmul_rates_in_turns(shapes: dict, dtype: torch.dtype | None = None,
                          device: torch.device | str | None = None, rounds: int = 5) -> dict:
    """FLOP/s of each named (m, k, n) product in every round, the products timed in turns (each round's fastest
    call): a slow spell of the machine then lowers one round of every product alike."""
    device = as_device(device)
    dtype = dtype or default_dtype(device)
    products = {}
    for name, (m, k, n) in shapes.items():
        a, b = torch.randn(m, k, device=device, dtype=dtype), torch.randn(k, n, device=device, dtype=dtype)
        products[name] = partial(torch.matmul, a, b)
    timings = time_alternating(products, device=device, rounds=rounds)
    return {name: [2 * m * k * n / t for t in timings[name].round_mins] for name, (m, k, n) in shapes.items()}


def measure_peak_flops(dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> float:
    """The most FLOP/s any of `matmul_ceiling_shapes` reached: a ceiling for every matmul the lab times.

    The shapes are timed in turns, round after round (`matmul_rates_in_turns`): a slow spell of the machine
    (another tenant of its host, which no reading here shows) then costs one round of every shape, instead of
    every timing of the shapes it happened to fall on."""
    shapes = {shape: shape for shape in matmul_ceiling_shapes(as_device(device))}
    return max(max(rates) for rates in matmul_rates_in_turns(shapes, dtype, device).values())


@dataclass(frozen=True)
class Ceilings:
    """Measured limits of a device: copy and read bandwidth (bytes/s) and the matmul FLOP/s per dtype."""

    device: str
    bandwidth: float  # copy: bytes read + written per second
    flops: dict[str, float]  # dtype name -> FLOP/s, the best over matmul_ceiling_shapes
    default_dtype: str
    read_bandwidth: float = field(default=0.0)  # bytes read per second by a read-only kernel

    @property
    def peak_flops(self) -> float:
        """Measured matmul FLOP/s in the device's default dtype."""
        return self.flops[self.default_dtype]

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where this device's measured roofline bends (copy bandwidth)."""
        return ridge_point(self.peak_flops, self.bandwidth)

    @property
    def stream_bandwidth(self) -> float:
        """The ceiling for read-dominated kernels (weights and KV streamed once): the faster of read and copy."""
        return max(self.read_bandwidth, self.bandwidth)

    def against(self, rates: dict[str, float]) -> dict[str, float]:
        """These bandwidths over `rates` timed elsewhere at the same sizes ({"copy": B/s, "read": B/s})."""
        mine = {"copy": self.bandwidth, "read": self.read_bandwidth}
        return {name: mine[name] / rate for name, rate in rates.items()}


def ceilings_drift(ceilings: Ceilings, device: torch.device | str | None = None) -> Contention:
    """How far this machine's speed has moved since `ceilings` were measured, for a self-check that sets them
    against a run: the copy bandwidth measured again now (about a second), printed beside its ceiling. Past
    SPEED_MOVED the check cannot judge (a VM's memory speed can swing for seconds with nothing visible running)."""
    now = measure_bandwidth(device)
    print(f"the ceiling's copy timed again now: {now / 1e9:.1f} GB/s, "
          f"{ceilings.bandwidth / 1e9:.1f} GB/s when measured")
    return speed_change([ceilings.bandwidth, now])


def dtypes_to_measure(device: torch.device) -> list[torch.dtype]:
    """The dtypes worth timing here: fp32 everywhere, plus the default half type on accelerators."""
    kinds = [torch.float32]
    if device.type != "cpu":
        kinds.append(default_dtype(device))
    return kinds


AGREE = (0.8, 1.25)  # ceilings within these ratios of rates timed elsewhere at the same sizes agree with them


def measure_ceilings(device: torch.device | str | None = None, refresh: bool = False,
                     agree_with: dict[str, float] | None = None) -> Ceilings:
    """Measured bandwidths and matmul rates of this device, cached in lab_dir() so notebooks reuse them.

    `agree_with`: copy and read rates timed elsewhere at the same sizes ({"copy": B/s, "read": B/s}). Where the
    ceilings' bandwidths fall outside AGREE of them they are measured again, up to twice: a VM can run its memory
    far faster (or slower) for a moment, and a ceiling caught in such a spell would misprice every later
    byte-bound prediction."""
    device = as_device(device)
    name = device_name(device)
    path = lab_dir() / f"ceilings-{slug(name)}.json"

    def measure() -> Ceilings:
        flops = {str(dt).removeprefix("torch."): measure_peak_flops(dt, device) for dt in dtypes_to_measure(device)}
        synchronize(device)
        return Ceilings(name, measure_bandwidth(device), flops, str(default_dtype(device)).removeprefix("torch."),
                        measure_read_bandwidth(device))

    def load(data: dict) -> Ceilings | None:  # files from before read bandwidth was measured are measured again
        return Ceilings(**data) if data.get("read_bandwidth") else None

    ceilings = measured_once(path, measure, "this device's ceilings", load, refresh)
    for _ in range(2 if agree_with else 0):
        ratios = ceilings.against(agree_with)
        if all(AGREE[0] < r < AGREE[1] for r in ratios.values()):
            break
        print("ceilings at " + ", ".join(f"{k} {r:.2f}x" for k, r in ratios.items())
              + " of the rates timed at the same sizes: measuring them again")
        ceilings = measured_once(path, measure, "this device's ceilings", load, refresh=True)
    return ceilings
