"""Chapter 8's exercises: answers computed from the lab's formulas and the step model, never typed in."""

from ..course.step_time import op_profile, predict_step_time
from ..plumbing.model_specs import expected_experts_hit
from . import Choice, Numeric


def _decode_step(spec, context: int, calibration, **_: object) -> float:
    """Seconds of one batch-1 decode step at `context` tokens: the calibrated step model's sum."""
    return predict_step_time(spec, 1, context, 1, calibration)


def _overhead(spec, op_overhead_s: float, **_: object) -> float:
    """Seconds of operator overhead in one decode step: (fixed + per layer x layers) calls x cost each."""
    return op_profile(spec, "decode").ops(spec.n_layers) * op_overhead_s


def _experts_read(spec, batch: int, bytes_per_elem: int = 2, **_: object) -> float:
    """Bytes of expert weights one decode step of `batch` sequences reads: the experts hit under uniform routing,
    every MoE layer, each expert's three matrices."""
    hit = expected_experts_hit(spec.n_experts, spec.experts_per_token, batch)
    return spec.n_moe_layers * hit * spec.expert_params * bytes_per_elem


EXERCISES = {
    # 8.1: the written-out decode step at another context, by hand (attention and cache copies scale with it)
    "8.1": Numeric(expected=_decode_step, rel_tol=0.05, unit="s"),
    # 8.2: the overhead term of a model not in the tables, from the per-family operator counts
    "8.2": Numeric(expected=_overhead, rel_tol=0.005, unit="s"),
    # 8.3: at batch 4 and a long context, which decode term grows with the context? (b) the cache's bytes
    "8.3": Choice("b", ("a", "b", "c")),
    # 8.4: expert bytes a batched decode step of Qwen3-30B-A3B reads (batch x k would double-count shared experts)
    "8.4": Numeric(expected=_experts_read, rel_tol=0.05, unit="B"),
}
