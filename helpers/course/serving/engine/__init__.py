"""The real engine, in process (chapters 6 and 9): transformers' continuous batching over a paged KV cache, run
on a fixed set of prompts (`run_paged`) or with requests arriving over time (`run_live`), every step recorded."""

from .interference import (
                           PackedStepCost,
                           engine_step_cost,
                           interference_metrics,
                           plot_token_gaps,
                           stall_workload,
                           stalls,
                           step_periods,
                           step_price_error,
)
from .live import ENGINE_SCHEDULERS, LiveRun, engine_config, run_live
from .paged_run import PagedRun, StepRecorder, on_new_thread, plot_engine_steps, run_paged, step_starts

__all__ = ["ENGINE_SCHEDULERS", "LiveRun", "PackedStepCost", "PagedRun", "StepRecorder", "engine_config",
           "engine_step_cost", "interference_metrics", "on_new_thread", "plot_engine_steps", "plot_token_gaps",
           "run_live", "run_paged", "stall_workload", "stalls", "step_periods", "step_price_error", "step_starts"]
