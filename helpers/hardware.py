"""Hardware: spec sheets of common GPUs, and this machine's measured ceilings (bandwidth, matmul rate)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

import torch

from .device import as_device, default_dtype, device_name, synchronize
from .profile import by_profile
from .results import lab_dir, slug
from .timing import benchmark


@dataclass(frozen=True)
class GPUSpec:
    """Vendor figures for one accelerator: dense (no sparsity) TFLOP/s, bandwidth in GB/s, memory in GB."""

    name: str
    bf16_tflops: float  # dense half-precision tensor-core rate (fp16 where the chip has no bf16)
    fp32_tflops: float  # plain fp32, no TF32 tensor cores
    bandwidth_gbs: float
    memory_gb: float
    match: tuple[str, ...]  # lower-case substrings of torch.cuda.get_device_name()

    @property
    def peak_flops(self) -> float:
        """Half-precision peak in FLOP/s."""
        return self.bf16_tflops * 1e12

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes/s."""
        return self.bandwidth_gbs * 1e9

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where the half-precision roofline bends."""
        return self.peak_flops / self.bandwidth


GPU_SPECS: dict[str, GPUSpec] = {
    # NVIDIA T4 datasheet: 65 TFLOPS fp16 tensor (Turing has no bf16), 8.1 fp32, 320 GB/s, 16 GB.
    "T4": GPUSpec("T4", 65, 8.1, 320, 16, ("t4",)),
    # NVIDIA L40S datasheet: 362 TFLOPS bf16 dense (733 sparse), 91.6 fp32, 864 GB/s, 48 GB.
    "L40S": GPUSpec("L40S", 362, 91.6, 864, 48, ("l40s",)),
    # NVIDIA L4 datasheet: 121 TFLOPS bf16 dense (242 sparse), 30.3 fp32, 300 GB/s, 24 GB.
    "L4": GPUSpec("L4", 121, 30.3, 300, 24, ("l4",)),
    # NVIDIA A100 datasheet (40GB SXM): 312 TFLOPS bf16 dense, 19.5 fp32, 1,555 GB/s.
    "A100 40GB": GPUSpec("A100 40GB", 312, 19.5, 1555, 40, ("a100-sxm4-40gb", "a100-pcie-40gb", "a100 40gb")),
    # NVIDIA A100 datasheet (80GB SXM): 312 TFLOPS bf16 dense, 19.5 fp32, 2,039 GB/s.
    "A100 80GB": GPUSpec("A100 80GB", 312, 19.5, 2039, 80, ("a100",)),
    # AWS G5 / Baseten "A10 vs A10G": 70 TFLOPS bf16 tensor, 35 fp32, 600 GB/s, 24 GB.
    "A10G": GPUSpec("A10G", 70, 35, 600, 24, ("a10g",)),
    # NVIDIA A10 datasheet: 125 TFLOPS bf16 dense (250 sparse), 31.2 fp32, 600 GB/s, 24 GB.
    "A10": GPUSpec("A10", 125, 31.2, 600, 24, ("a10",)),
    # NVIDIA H100 datasheet (SXM): 989 TFLOPS bf16 dense (1,979 is with sparsity), 67 fp32, 3.35 TB/s.
    "H100 SXM": GPUSpec("H100 SXM", 989, 67, 3350, 80, ("h100 80gb hbm3", "h100 sxm")),
    # NVIDIA H100 datasheet (PCIe): 756 TFLOPS bf16 dense, 51 fp32, 2.0 TB/s, 80 GB.
    "H100 PCIe": GPUSpec("H100 PCIe", 756, 51, 2000, 80, ("h100 pcie", "h100")),
    # NVIDIA H200 datasheet (SXM): 989 TFLOPS bf16 dense, 67 fp32, 4.8 TB/s, 141 GB.
    "H200": GPUSpec("H200", 989, 67, 4800, 141, ("h200",)),
    # Ada whitepaper, RTX 4090: 165 TFLOPS bf16/fp16 with fp32 accumulate (dense), 82.6 fp32, 1,008 GB/s.
    "RTX 4090": GPUSpec("RTX 4090", 165, 82.6, 1008, 24, ("4090",)),
}


def find_gpu_spec(name: str) -> GPUSpec | None:
    """The spec row whose match strings occur in a device name (None if the device is not listed)."""
    lowered = name.lower()
    for spec in GPU_SPECS.values():  # ordered so that specific names come before general ones
        if any(m in lowered for m in spec.match):
            return spec
    return None


def gpu_spec(name: str) -> GPUSpec:
    """The spec row for a GPU by its table name (e.g. 'H100 SXM'); a clear error for unknown names."""
    if name not in GPU_SPECS:
        raise ValueError(f"name must be one of {sorted(GPU_SPECS)}, got {name!r}")
    return GPU_SPECS[name]


def measure_bandwidth(device: torch.device | str | None = None, nbytes: int | None = None) -> float:
    """Memory bandwidth in bytes/s from the fastest of repeated large copies (bytes read + written)."""
    device = as_device(device)
    if nbytes is None:
        nbytes = (1024 if device.type == "cuda" else 256) * 2**20
    if nbytes < 2**20:
        raise ValueError(f"nbytes must be at least 1 MiB (2**20) to get past the caches, got {nbytes}")
    src = torch.empty(nbytes // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    timing = benchmark(lambda: dst.copy_(src), device=device)
    return 2 * src.nbytes / timing.min  # a ceiling: the best the device reached


def measure_matmul_flops(
    dtype: torch.dtype | None = None, device: torch.device | str | None = None, n: int | None = None
) -> float:
    """FLOP/s of the fastest of repeated n x n x n matmuls (2 n^3 FLOPs) on random data."""
    device = as_device(device)
    dtype = dtype or default_dtype(device)
    if n is None:
        n = 8192 if device.type == "cuda" else by_profile(quick=1024, cpu=2048, full=2048)
    if n < 16:
        raise ValueError(f"n must be >= 16, got {n}")
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    timing = benchmark(lambda: a @ b, device=device)
    return 2 * n**3 / timing.min  # a ceiling: the best the device reached


@dataclass(frozen=True)
class Ceilings:
    """The two measured limits of a device: memory bandwidth (bytes/s) and matmul FLOP/s per dtype."""

    device: str
    bandwidth: float
    flops: dict[str, float]  # dtype name -> FLOP/s
    default_dtype: str

    @property
    def peak_flops(self) -> float:
        """Measured matmul FLOP/s in the device's default dtype."""
        return self.flops[self.default_dtype]

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where this device's measured roofline bends."""
        return ridge_point(self.peak_flops, self.bandwidth)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """Arithmetic intensity (FLOP/byte) at which compute time equals memory time."""
    if peak_flops <= 0 or bandwidth <= 0:
        raise ValueError(f"peak_flops and bandwidth must be > 0, got {peak_flops} and {bandwidth}")
    return peak_flops / bandwidth


def dtypes_to_measure(device: torch.device) -> list[torch.dtype]:
    """The dtypes worth timing here: fp32 everywhere, plus the default half type on accelerators."""
    kinds = [torch.float32]
    if device.type != "cpu":
        kinds.append(default_dtype(device))
    return kinds


def measure_ceilings(device: torch.device | str | None = None, refresh: bool = False) -> Ceilings:
    """Measured bandwidth and matmul rates of this device, cached in lab_dir() so notebooks reuse them."""
    device = as_device(device)
    name = device_name(device)
    path = lab_dir() / f"ceilings-{slug(name)}.json"
    if path.exists() and not refresh:
        data = json.loads(path.read_text())
        return Ceilings(**data)
    flops = {str(dt).removeprefix("torch."): measure_matmul_flops(dt, device) for dt in dtypes_to_measure(device)}
    synchronize(device)
    ceilings = Ceilings(name, measure_bandwidth(device), flops, str(default_dtype(device)).removeprefix("torch."))
    path.write_text(json.dumps(asdict(ceilings), indent=2))
    return ceilings
