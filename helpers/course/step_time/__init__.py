"""How long a step takes: the course's central idea, in one package.

A step's work is `Work`: one (new tokens, context after the step) per sequence. Three models price it, each a
callable `cost(work) -> seconds`, and each used from chapter 1 on:
- `roofline`: the least time on a machine's ceilings (measured here, or a GPU's spec sheet);
- `fitted`: a line fitted to steps timed on this device;
- `calibrated`: the step model, what the implementation runs (matmuls at the rate measured for that many
  rows, weights streamed, cache copies and the fresh pages they map on a CPU, attention, operator calls at
  their measured cost) from the `calibration`'s probes (`probes`) and the operator profile of the
  architecture (`operators`).
"""

from .calibrated import (
    CalibratedStepCost,
    predict_step_time,
    step_time_breakdown,
    total_time,
    work_breakdown,
    work_terms,
)
from .calibration import Calibration, calibrate, calibration_drift, spec_calibration
from .fitted import LinearStepCost, PackedStepCost, fit_linear_cost
from .operators import OpProfile, op_profile
from .roofline import (
    RooflineStepCost,
    RooflineTerms,
    compute_bound_batch,
    longest_compute_bound_context,
    request_roofline,
    spec_sheet_time,
    step_roofline,
)
from .work import StepCost, Work, check_work

__all__ = ["CalibratedStepCost", "Calibration", "LinearStepCost", "OpProfile", "PackedStepCost", "RooflineStepCost",
           "RooflineTerms", "StepCost", "Work", "calibrate", "calibration_drift", "check_work",
           "compute_bound_batch", "fit_linear_cost", "longest_compute_bound_context", "op_profile",
           "predict_step_time", "request_roofline", "spec_calibration", "spec_sheet_time", "step_roofline",
           "step_time_breakdown", "total_time", "work_breakdown", "work_terms"]
