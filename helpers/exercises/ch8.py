"""Chapter 8's exercises: answers computed from the lab's formulas and the step model, never typed in."""

from ..course.step_time import op_profile, predict_step_time
from . import Choice, Numeric


def _decode_step(spec, context: int, calibration, **_: object) -> float:
    """Seconds of one batch-1 decode step at `context` tokens: the calibrated step model's sum."""
    return predict_step_time(spec, 1, context, 1, calibration)


def _overhead(spec, op_overhead_s: float, **_: object) -> float:
    """Seconds of operator overhead in one decode step: (fixed + per layer x layers) calls x cost each."""
    return op_profile(spec, "decode").ops(spec.n_layers) * op_overhead_s


EXERCISES = {
    # 8.1: the written-out decode step at another context, by hand (attention and cache copies scale with it)
    "8.1": Numeric(expected=_decode_step, rel_tol=0.05, unit="s"),
    # 8.2: the overhead term of a model not in the tables, from the per-family operator counts
    "8.2": Numeric(expected=_overhead, rel_tol=0.005, unit="s"),
    # 8.3: at batch 4 and a long context, which decode term grows with the context? (b) the cache's bytes
    "8.3": Choice("b", ("a", "b", "c")),
}
