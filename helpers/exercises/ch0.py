"""Chapter 0 exercises: expected answers, computed from the spec table and the lab's formulas."""

from __future__ import annotations

from ..course.formulas import weight_bytes_read
from ..course.hardware import gpu_spec
from ..plumbing.models import model_spec
from . import Choice, Numeric


def gpt2_large_read_ms(bandwidth: float, **_: object) -> float:
    """Milliseconds to stream GPT-2 large's bf16 weights once at `bandwidth` bytes/s (formulas.weight_bytes_read)."""
    return weight_bytes_read(model_spec("gpt2-large"), 2) / bandwidth * 1e3


EXERCISES = {
    "0.1": Numeric(expected=lambda **_: gpu_spec("A100 80GB SXM").ridge_point, rel_tol=0.03, unit="FLOP/byte"),
    "0.2": Numeric(expected=gpt2_large_read_ms, rel_tol=0.05, unit="ms"),
    "0.3": Choice("compute", ("memory", "compute")),
}
