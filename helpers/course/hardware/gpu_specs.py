"""Chapter 0, spec sheets: the vendor figures of common GPUs, and finding this machine's row.

Units: FLOP/s and bytes/s in decimal units (TFLOP/s = 1e12, GB/s = 1e9), as spec sheets give them. Memory
*capacity* is binary and is what the driver reports, which is not always the number a card is sold with:
- HBM parts (V100, A100, H100, H200) report about the sold figure in GiB: an H100 80GB reports 81,559 MiB.
- GDDR parts with ECC on (the data-centre default: T4, A10, L4, L40, L40S) give about 1/16 of it to ECC: a
  T4 sold as 16 GB reports 15,360 MiB, an L40S sold as 48 GB 46,068 MiB.
`GPUSpec.memory_bytes` is the driver's total where the lab has a published `nvidia-smi` reading of it
(`memory_mib`), and otherwise one of these two rules; on a real GPU use `device_memory_bytes`.

L2 caches differ as much: from 4 MB (T4) and 6 MB (A10) through 40-50 MB (A100, H100) to 96 MB (L40S).

Rows as their vendors publish them, each with its source and date; the table was last brought up to date in
December 2026. Rack-scale systems (GB200 and GB300 NVL72: 72 GPUs in one NVLink domain) run the same GPUs at
a higher power limit and have no row of their own.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

from ..formulas import ridge_point

ECC_SHARE = 1 / 16  # of a GDDR card's memory that ECC takes when on (T4: 16 GiB -> 15,360 MiB)


@dataclass(frozen=True)
class GPUSpec:
    """Vendor figures for one accelerator: dense (no sparsity) TFLOP/s, bandwidth in GB/s, memory in GB."""

    name: str
    bf16_tflops: float  # dense half-precision tensor-core rate: bf16, or fp16 on chips without bf16 (T4, V100)
    fp32_tflops: float  # plain fp32, no TF32 tensor cores
    bandwidth_gbs: float
    memory_gb: float  # as sold ("80 GB"); see memory_bytes for what the driver reports
    match: tuple[str, ...]  # lower-case device names (torch.cuda.get_device_name()) this row stands for, exactly
    hbm: bool = True  # HBM (reports about the sold GB as GiB) or GDDR (ECC takes ECC_SHARE when on)
    memory_mib: int | None = None  # total nvidia-smi reports (MiB), where a published reading exists

    @property
    def peak_flops(self) -> float:
        """Half-precision peak in FLOP/s."""
        return self.bf16_tflops * 1e12

    @property
    def bandwidth(self) -> float:
        """Memory bandwidth in bytes/s."""
        return self.bandwidth_gbs * 1e9

    @property
    def memory_bytes(self) -> float:
        """Capacity in bytes as the driver reports it: the stored reading, else sold GB as GiB (less ECC on GDDR)."""
        if self.memory_mib is not None:
            return self.memory_mib * 2**20
        return self.memory_gb * 2**30 * (1 if self.hbm else 1 - ECC_SHARE)

    @property
    def memory_source(self) -> str:
        """Where `memory_bytes` comes from: a published driver reading, or which rule."""
        if self.memory_mib is not None:
            return "nvidia-smi"
        return "sold GB as GiB (HBM)" if self.hbm else "sold GB as GiB less 1/16 ECC (GDDR)"

    @property
    def ridge_point(self) -> float:
        """FLOP per byte where the half-precision roofline bends."""
        return ridge_point(self.peak_flops, self.bandwidth)


GPU_SPECS: dict[str, GPUSpec] = {
    # NVIDIA T4 datasheet: 65 TFLOPS fp16 tensor, 8.1 fp32, 320 GB/s, 16 GB GDDR6; nvidia-smi reports
    # 15,360 MiB with ECC on. Turing (compute capability 7.5) has no bf16 units (torch emulates bf16 there,
    # without tensor cores): default_dtype picks fp16, so the half-precision column is the fp16 tensor rate.
    "T4": GPUSpec("T4", 65, 8.1, 320, 16, ("tesla t4",), hbm=False, memory_mib=15_360),
    # NVIDIA V100 datasheet: SXM2 125 TFLOPS fp16 tensor, 15.7 fp32; PCIe 112 and 14; 900 GB/s HBM2 for all,
    # 16 or 32 GB. Volta (capability 7.0) has no bf16 units either: fp16 there, as on the T4. The V100S
    # (1,134 GB/s) is another part with no row here.
    "V100 SXM2 32GB": GPUSpec("V100 SXM2 32GB", 125, 15.7, 900, 32, ("tesla v100-sxm2-32gb",)),
    "V100 SXM2 16GB": GPUSpec("V100 SXM2 16GB", 125, 15.7, 900, 16, ("tesla v100-sxm2-16gb",)),
    "V100 PCIe 32GB": GPUSpec("V100 PCIe 32GB", 112, 14, 900, 32, ("tesla v100-pcie-32gb",)),
    "V100 PCIe 16GB": GPUSpec("V100 PCIe 16GB", 112, 14, 900, 16, ("tesla v100-pcie-16gb",)),
    # NVIDIA L40S datasheet: 362 TFLOPS bf16 dense (733 sparse), 91.6 fp32, 864 GB/s, 48 GB GDDR6 with ECC;
    # nvidia-smi reports 46,068 MiB.
    "L40S": GPUSpec("L40S", 362, 91.6, 864, 48, ("nvidia l40s",), hbm=False, memory_mib=46_068),
    # NVIDIA L40 datasheet: 181 TFLOPS bf16 dense (362 sparse), 90.5 fp32, 864 GB/s, 48 GB GDDR6 with ECC.
    "L40": GPUSpec("L40", 181, 90.5, 864, 48, ("nvidia l40",), hbm=False),
    # NVIDIA L4 datasheet: 121 TFLOPS bf16 dense (242 sparse), 30.3 fp32, 300 GB/s, 24 GB GDDR6; nvidia-smi
    # reports 23,034 MiB.
    "L4": GPUSpec("L4", 121, 30.3, 300, 24, ("nvidia l4",), hbm=False, memory_mib=23_034),
    # NVIDIA A100 datasheet: 312 TFLOPS bf16 dense, 19.5 fp32 for every form; 40GB (SXM and PCIe alike)
    # 1,555 GB/s; 80GB SXM 2,039 GB/s; 80GB PCIe (300 W) 1,935 GB/s. HBM2/HBM2e.
    "A100 40GB": GPUSpec("A100 40GB", 312, 19.5, 1555, 40, ("nvidia a100-sxm4-40gb", "nvidia a100-pcie-40gb")),
    "A100 80GB SXM": GPUSpec("A100 80GB SXM", 312, 19.5, 2039, 80, ("nvidia a100-sxm4-80gb",)),
    "A100 80GB PCIe": GPUSpec("A100 80GB PCIe", 312, 19.5, 1935, 80, ("nvidia a100 80gb pcie",)),
    # NVIDIA A10G: an AWS-only part with no NVIDIA datasheet, so no primary source exists for its rates. AWS's
    # G5 instance page (primary) gives only "NVIDIA A10G Tensor Core GPU, 24 GB"; 70 TFLOPS bf16 tensor, 35 fp32
    # and 600 GB/s come from secondary sources (Baseten's "A10 vs A10G", the GA102 spec): treat as approximate.
    # GDDR6 with ECC: nvidia-smi on a G5 instance reports 23,028 MiB.
    "A10G": GPUSpec("A10G", 70, 35, 600, 24, ("nvidia a10g",), hbm=False, memory_mib=23_028),
    # NVIDIA A10 datasheet: 125 TFLOPS bf16 dense (250 sparse), 31.2 fp32, 600 GB/s, 24 GB GDDR6 with ECC.
    "A10": GPUSpec("A10", 125, 31.2, 600, 24, ("nvidia a10",), hbm=False),
    # NVIDIA H100 datasheet (SXM): 989 TFLOPS bf16 dense (1,979 is with sparsity), 67 fp32, 3.35 TB/s, 80 GB
    # HBM3; nvidia-smi reports 81,559 MiB.
    "H100 SXM": GPUSpec("H100 SXM", 989, 67, 3350, 80, ("nvidia h100 80gb hbm3",), memory_mib=81_559),
    # NVIDIA H100 datasheet (PCIe): 756 TFLOPS bf16 dense, 51 fp32, 2.0 TB/s, 80 GB HBM2e.
    "H100 PCIe": GPUSpec("H100 PCIe", 756, 51, 2000, 80, ("nvidia h100 pcie",)),
    # NVIDIA H100 datasheet (NVL): 835 TFLOPS bf16 dense (1,671 sparse), 60 fp32, 3.9 TB/s, 94 GB.
    "H100 NVL": GPUSpec("H100 NVL", 835, 60, 3900, 94, ("nvidia h100 nvl",)),
    # NVIDIA H200 datasheet (SXM): 989 TFLOPS bf16 dense, 67 fp32, 4.8 TB/s, 141 GB HBM3e. The H200 NVL
    # (reported as "NVIDIA H200 NVL", 835 TFLOPS) has no row here.
    "H200": GPUSpec("H200", 989, 67, 4800, 141, ("nvidia h200",)),
    # NVIDIA HGX platform page (nvidia.com/en-us/data-center/hgx, HGX B200 column, 2025): 8 GPUs give 36 PFLOPS
    # FP16/BF16 with sparsity (2,250 dense each), 600 TFLOPS FP32 (75 each), 1.4 TB (180 GB each); the DGX B200
    # datasheet (2024): 64 TB/s of HBM3e for the 8 (8 TB/s each); NVLink 5, 1.8 TB/s a GPU. nvidia-smi reports
    # 183,359 MiB (NVIDIA/TensorRT-LLM issue 10278, December 2025).
    "B200": GPUSpec("B200", 2250, 75, 8000, 180, ("nvidia b200",), memory_mib=183_359),
    # The same page, HGX B300 column (Blackwell Ultra, 2025): 36 PFLOPS FP16/BF16 with sparsity and 600 TFLOPS
    # FP32 for 8 GPUs, as the B200 (the gain is in dense FP4 and attention), up to 2.3 TB (288 GB each); NVIDIA's
    # Blackwell Ultra technical blog (March 2025): 8 TB/s a GPU. torch names it "NVIDIA B300 SXM6 AC"
    # (vllm-project/vllm issue 30441, December 2025).
    "B300": GPUSpec("B300", 2250, 75, 8000, 288, ("nvidia b300 sxm6 ac",)),
    # AMD Instinct MI300X data sheet (December 2023): 1,307.4 TFLOPS FP16/BF16 dense (2,614.9 with sparsity),
    # 163.4 FP32 vector, 5.3 TB/s, 192 GB HBM3. A VM's passed-through GPU reports "... MI300X VF".
    "MI300X": GPUSpec("MI300X", 1307.4, 163.4, 5300, 192, ("amd instinct mi300x", "amd instinct mi300x vf")),
    # AMD Instinct MI325X data sheet (October 2024): the MI300X's compute with 256 GB HBM3E at 6 TB/s.
    "MI325X": GPUSpec("MI325X", 1307.4, 163.4, 6000, 256, ("amd instinct mi325x",)),
    # AMD Instinct MI355X product page (June 2025, CDNA 4): 2.5 PFLOPS FP16/BF16 dense (5.0 with sparsity),
    # 157.3 TFLOPS FP32 vector, 8 TB/s, 288 GB HBM3E, 1,400 W.
    "MI355X": GPUSpec("MI355X", 2500, 157.3, 8000, 288, ("amd instinct mi355x",)),
    # Ada whitepaper, RTX 4090: 165 TFLOPS bf16/fp16 with fp32 accumulate (dense), 82.6 fp32, 1,008 GB/s,
    # 24 GB GDDR6X without ECC; nvidia-smi reports 24,564 MiB.
    "RTX 4090": GPUSpec("RTX 4090", 165, 82.6, 1008, 24, ("nvidia geforce rtx 4090",), hbm=False, memory_mib=24_564),
}

GPU_VENDOR_WORDS = ("nvidia", "tesla", "geforce", "quadro", "radeon", "instinct")  # GPU names, never a CPU's


def find_gpu_spec(name: str) -> GPUSpec | None:
    """The spec row for a device name as torch.cuda.get_device_name() gives it, matched exactly (None if unlisted).

    Exact names, not substrings or families: "NVIDIA L40" must not find the L4 row, "NVIDIA GH200 480GB" the
    H200's, nor a 16 GB V100 the 32 GB one. A GPU with no row of its own gets none, with a warning, so that
    no chapter uses a neighbour's numbers for it."""
    lowered = name.strip().lower()
    for spec in GPU_SPECS.values():
        if lowered in spec.match or lowered == spec.name.lower():
            return spec
    if any(word in lowered for word in GPU_VENDOR_WORDS):
        warnings.warn(f"no spec row for {name!r} (the table matches exact device names only): its spec figures are "
                      "left out and only measured ceilings are used", stacklevel=2)
    return None


def gpu_spec(name: str) -> GPUSpec:
    """The spec row for a GPU by its table name (e.g. 'H100 SXM'); a clear error for unknown names."""
    if name not in GPU_SPECS:
        raise ValueError(f"name must be one of {sorted(GPU_SPECS)}, got {name!r}")
    return GPU_SPECS[name]
