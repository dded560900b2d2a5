"""Chapter 10, beyond one device: tensor parallelism measured and predicted, pipeline parallelism on paper.

- `launch`: run a script as N ranks under torchrun, collect their results, always stop every process;
- `collectives`: the alpha-beta model of a collective, fitted on timed all-reduces or set from a link's spec;
- `tp_step`: a tensor-parallel decode step per rank: the step model of the rank's share plus the collectives;
- `pipeline`: a pipeline's schedule and its bubble;
- `scripts/`: what the ranks run (a collectives sweep; the step model's probes in every rank at once;
  transformers' `tp_plan="auto"` decoding).
"""

from .collectives import (
    LINKS,
    AlphaBeta,
    CollectiveClock,
    Link,
    fit_alpha_beta,
    fit_errors,
    measure_collectives,
    slowest_rank,
)
from .launch import RankError, run_ranks, script_path, side_by_side, threads_per_rank, usable_cores
from .pipeline import bubble_fraction, pipeline_schedule, plot_pipeline
from .tp_step import (
    TPPlan,
    comm_terms,
    operator_kind,
    profile_by_kind,
    rank_calibration,
    rank_spec,
    shard_shapes,
    shared_calibration,
    slowest_of,
    spec_tp_step,
    step_table,
    time_steps,
    together_calibration,
    torch_threads,
    tp_step_breakdown,
)

__all__ = ["AlphaBeta", "CollectiveClock", "LINKS", "Link", "RankError", "TPPlan", "bubble_fraction", "comm_terms",
           "fit_alpha_beta", "fit_errors", "measure_collectives", "operator_kind", "pipeline_schedule",
           "plot_pipeline", "profile_by_kind", "rank_calibration", "rank_spec", "run_ranks",
           "script_path", "shard_shapes", "shared_calibration", "side_by_side", "slowest_of", "slowest_rank",
           "spec_tp_step", "step_table", "threads_per_rank", "time_steps", "together_calibration", "torch_threads",
           "tp_step_breakdown", "usable_cores"]
