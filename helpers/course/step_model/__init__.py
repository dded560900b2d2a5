"""The calibrated step model: predict a forward step's seconds on this device before running it (chapter 8).

`calibrate()` measures what a forward pass runs into (matmul rate by token count, weight streaming, the
cache's copies, attention, per-operator cost); `predict_step_time()` adds up what the implementation runs.
"""

from .calibration import Calibration, calibrate, spec_calibration
from .capstone import layer_spec, plot_predictions
from .operators import OpProfile, op_profile
from .prediction import CalibratedStepCost, predict_step_time, spec_sheet_time, step_time_breakdown

__all__ = ["CalibratedStepCost", "Calibration", "OpProfile", "calibrate", "layer_spec", "op_profile",
           "plot_predictions", "predict_step_time", "spec_calibration", "spec_sheet_time", "step_time_breakdown"]
