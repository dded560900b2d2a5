"""Chapter 0 exercises: expected answers, computed from the spec table and the lab's formulas."""

from __future__ import annotations

from ..course.formulas import weight_bytes_read
from ..course.hardware import gpu_spec
from ..plumbing.models import model_spec
from . import Choice, Numeric


def a100_fp32_ridge(**_: object) -> float:
    """FLOP/byte at which an A100 80GB SXM's plain fp32 rate (no tensor cores) meets its bandwidth."""
    spec = gpu_spec("A100 80GB SXM")
    return spec.fp32_tflops * 1e12 / spec.bandwidth


def gpt2_large_read_ms(bandwidth: float, **_: object) -> float:
    """Milliseconds to stream GPT-2 large's bf16 weights once at `bandwidth` bytes/s (formulas.weight_bytes_read)."""
    return weight_bytes_read(model_spec("gpt2-large"), 2) / bandwidth * 1e3


def copy_ms(nbytes: float, bandwidth: float, **_: object) -> float:
    """Milliseconds to copy `nbytes` into another buffer at a copy bandwidth that counts read + written bytes."""
    return 2 * nbytes / bandwidth * 1e3


EXERCISES = {
    "0.1": Numeric(expected=a100_fp32_ridge, rel_tol=0.03, unit="FLOP/byte"),
    "0.2": Numeric(expected=gpt2_large_read_ms, rel_tol=0.05, unit="ms"),
    "0.3": Choice("compute", ("memory", "compute")),
    "0.4": Numeric(expected=copy_ms, rel_tol=0.05, unit="ms"),
}
