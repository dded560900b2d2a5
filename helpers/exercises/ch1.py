"""Chapter 1 exercises: expected answers, computed from the spec table and the lab's formulas."""

from __future__ import annotations

from ..course.formulas import critical_tokens, matmul_bytes, matmul_intensity, matmul_params
from ..course.hardware import gpu_spec
from ..plumbing.models import model_spec
from . import Choice, Numeric


def matvec_ms(d_in: int, d_out: int, bytes_per_elem: int, bandwidth: float, **_: object) -> float:
    """Milliseconds a one-token (1 x d_in) @ (d_in x d_out) product takes to move its bytes at `bandwidth`."""
    return matmul_bytes(1, d_in, d_out, bytes_per_elem) / bandwidth * 1e3


EXERCISES = {
    "1.1": Numeric(expected=lambda **_: matmul_intensity(32, 4096, 14336, 2), rel_tol=0.02, unit="FLOP/byte"),
    "1.2": Numeric(expected=lambda **_: critical_tokens(8192, 28672, gpu_spec("A100 80GB SXM").ridge_point, 2),
                   rel_tol=0.05, unit="sequences"),
    "1.3": Choice("overhead", ("compute", "cache", "overhead")),
    "1.4": Numeric(expected=lambda **_: 6 * matmul_params(model_spec("gpt2")), rel_tol=0.05, unit="FLOP"),
    "1.5": Numeric(expected=matvec_ms, rel_tol=0.05, unit="ms"),
}
