"""Chapter 0, your hardware: the spec sheets of common GPUs (`gpu_specs`) and this machine's measured ceilings
(`ceilings`); the links between devices and the alpha-beta model of a message on one (`links`, chapters 9
and 10)."""

from .ceilings import (
    AGREE,
    Ceilings,
    ceilings_drift,
    default_stream_bytes,
    dtypes_to_measure,
    matmul_ceiling_shapes,
    matmul_rates_in_turns,
    measure_bandwidth,
    measure_ceilings,
    measure_matmul_flops,
    measure_peak_flops,
    measure_read_bandwidth,
)
from .gpu_specs import ECC_SHARE, GPU_SPECS, GPU_VENDOR_WORDS, GPUSpec, find_gpu_spec, gpu_spec
from .links import LINKS, AlphaBeta, Link, kv_transfer_s

__all__ = ["AGREE", "ECC_SHARE", "GPU_SPECS", "GPU_VENDOR_WORDS", "LINKS", "AlphaBeta", "Ceilings", "GPUSpec",
           "Link", "ceilings_drift", "kv_transfer_s",
           "default_stream_bytes", "dtypes_to_measure", "find_gpu_spec", "gpu_spec", "matmul_ceiling_shapes",
           "matmul_rates_in_turns", "measure_bandwidth", "measure_ceilings", "measure_matmul_flops",
           "measure_peak_flops", "measure_read_bandwidth"]
