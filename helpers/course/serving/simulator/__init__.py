"""The model of a server (chapters 5 and 9): a scheduler and a discrete-event simulation, priced by a step cost."""

from .disaggregation import TRANSFER_COLUMNS, DisaggregatedRun, kv_transfer_s, simulate_disaggregated, simulate_replicas
from .scheduler import POLICIES, Limits, Seq, postprocess, schedule
from .simulation import BUDGETED, SCHEDULERS, STEP_COLUMNS, TRACE_COLUMNS, Engine, Simulation, simulate
from .trace_plot import TRACE_COLORS, plot_trace

__all__ = ["BUDGETED", "POLICIES", "SCHEDULERS", "STEP_COLUMNS", "TRACE_COLORS", "TRACE_COLUMNS", "TRANSFER_COLUMNS",
           "DisaggregatedRun", "Engine", "Limits", "Seq", "Simulation", "kv_transfer_s", "plot_trace", "postprocess",
           "schedule", "simulate", "simulate_disaggregated", "simulate_replicas"]
