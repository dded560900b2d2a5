"""Chapter 2 exercises: expected answers, computed from the spec table and the lab's formulas."""

from __future__ import annotations

from ..course.formulas import decode_step_bytes, kv_cache_bytes, weight_bytes_read
from ..course.hardware import gpu_spec
from ..course.step_time import predict_step_time, request_roofline
from ..plumbing.models import model_spec
from . import Choice, Numeric


def _tpot_ms(model: str, gpu: str) -> float:
    """Batch-1, short-context decode floor in ms: the matrix weights (bf16) at the spec bandwidth."""
    return weight_bytes_read(model_spec(model), 2) / gpu_spec(gpu).bandwidth * 1e3


def _longer_phase(model: str, gpu: str, n_in: int, n_out: int) -> str:
    """'prefill' or 'decode': which phase of one request takes longer on the spec roofline (bf16)."""
    hw = gpu_spec(gpu)
    ttft, decode = request_roofline(model_spec(model), n_in, n_out, hw.peak_flops, hw.bandwidth, 2)
    return "prefill" if ttft > decode else "decode"


def _kv_share(model: str, context: int) -> float:
    """Fraction of the bytes a decode step must read (bf16, batch 1) that is KV cache."""
    spec = model_spec(model)
    kv = kv_cache_bytes(spec.n_layers, spec.n_kv_heads, spec.head_dim, context, 1, 2)
    return kv / decode_step_bytes(spec, context, 1, 2, cache="static")


def _decode_step_ms(model: str, context: int, calibration) -> float:
    """2.5: the calibrated step model's time of one decode step (batch 1) at `context`, in ms."""
    return predict_step_time(model_spec(model), 1, context, 1, calibration) * 1e3


EXERCISES = {
    "2.1": Numeric(expected=lambda **_: _tpot_ms("llama-2-7b", "H100 SXM"), rel_tol=0.1, unit="ms"),
    "2.2": Choice(_longer_phase("llama-3-8b", "A100 80GB SXM", 8000, 40), ("prefill", "decode")),
    "2.3": Numeric(expected=lambda **_: _kv_share("gpt2", 1024), rel_tol=0.05),
    "2.4": Numeric(expected=lambda **_: gpu_spec("L4").ridge_point, rel_tol=0.25, unit="sequences"),
    "2.5": Numeric(expected=_decode_step_ms, rel_tol=0.05, unit="ms"),
}
