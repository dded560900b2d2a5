"""Chapter 10's exercises: expected answers computed from the lab's alpha-beta, spec-sheet and pipeline arithmetic."""

from __future__ import annotations

from ..course.formulas import weight_bytes_read
from ..course.hardware import gpu_spec
from ..course.hardware.links import LINKS, AlphaBeta
from ..course.parallel.pipeline import bubble_fraction
from ..plumbing.models import model_spec
from ..plumbing.validate import positive_int
from . import Numeric


def _allreduce_ms(alpha_us: float, bandwidth_gbs: float, allreduces: int, batch: int, d_model: int,
                  bytes_per_elem: int) -> float:
    """ms a decode step spends in its all-reduces, each of batch x d_model values, at the fitted alpha-beta."""
    fit = AlphaBeta(alpha_us * 1e-6, bandwidth_gbs * 1e9)
    return positive_int("allreduces", allreduces) * fit(batch * d_model * bytes_per_elem) * 1e3


def _tp_step_ms(model: str, gpu: str, link: str, tp: int) -> float:
    """ms of a batch-1 decode step on `tp` GPUs from the spec sheets: each reads 1/tp of the bf16 weights at the
    GPU's bandwidth, then 2 x n_layers all-reduces of d_model bf16 values over the link (KV and logits left out)."""
    spec, card, wire = model_spec(model), gpu_spec(gpu), LINKS[link]
    weights_s = weight_bytes_read(spec, 2) / positive_int("tp", tp) / card.bandwidth
    comm_s = 2 * spec.n_layers * wire.allreduce(tp)(spec.d_model * 2) if tp > 1 else 0.0
    return (weights_s + comm_s) * 1e3


def _bubble(stages: int, micro_batches: int) -> float:
    """Share of stage-time a pipeline spends idle per batch."""
    return bubble_fraction(stages, micro_batches)


EXERCISES = {
    "10.1": Numeric(expected=_allreduce_ms, rel_tol=0.05, unit="ms"),
    "10.2": Numeric(expected=_tp_step_ms, rel_tol=0.05, unit="ms"),
    "10.3": Numeric(expected=_bubble, rel_tol=0.02, unit=""),
    "10.4": Numeric(expected=_tp_step_ms, rel_tol=0.05, unit="ms"),
}
