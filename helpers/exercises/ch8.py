"""Chapter 8's exercises: answers computed from the lab's formulas and the step model, never typed in."""

from ..course.formulas import weight_bytes_read
from ..course.step_time import op_profile
from . import Choice, Numeric

EXERCISES = {
    # 8.1: the memory floor of a batch-1 decode step: every matrix weight once at the calibrated read bandwidth
    "8.1": Numeric(expected=lambda spec, bytes_per_elem, read_bandwidth, **_: weight_bytes_read(spec, bytes_per_elem)
                   / read_bandwidth, rel_tol=0.05, unit="s"),
    # 8.2: operator calls one decode step dispatches: fixed ones plus the per-layer count times the layers
    "8.2": Numeric(expected=lambda spec, **_: op_profile(spec, "decode").ops(spec.n_layers), rel_tol=0.02,
                   unit="ops"),
    # 8.3: at batch 4 and a long context, which decode term grows with the context? (b) the cache's bytes
    "8.3": Choice("b", ("a", "b", "c")),
}
