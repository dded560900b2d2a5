"""The Transformer Inference Lab's library: what the notebooks import.

Two tiers, one folder each:
- `helpers.plumbing`: what every chapter uses (device, profile, timing, sweeps, memory, models, results, a
  class's results (export and merge), plots, widgets, checks, argument validation, fits, the Hub probe, the
  offline tokenizer, version compat).
- `helpers.course`: the ideas, one module or folder per chapter topic (`hardware/` 0, `roofline/` 1, `phases`
  and `latency` 2, `attention` 3, `kv_cache/` 4, `serving/` 5, 6 and 9, `faster_decode/` 7, `capstone` 8,
  `parallel/` 10), `lab` (the first cell's `lab`: plumbing's setup plus chapter 0's measured ceilings),
  `formulas`, every closed form once, and `step_time/`, the course's central idea: how long a step takes (the
  roofline, a fitted line and the calibrated step model, used from chapter 1 on).
`helpers.exercises` holds each chapter's expected exercise answers, out of the notebooks' sight.

The names below are the public API: learners' and instructors' code calls them by `helpers.NAME`.
"""

import logging as _logging

# transformers imports torchao (chapter 7's quantisation library) whenever it is installed. On a machine
# without the GPU its prebuilt kernels are for, torchao logs a warning per kernel file it cannot load, and
# its Enum registrations log torch deprecation notices: noise in every chapter, about code no chapter runs.
for _name in ("torchao", "torch.utils._pytree"):
    _logging.getLogger(_name).setLevel(_logging.ERROR)

from .course.formulas import (
    CACHE_COPY_PASSES,
    arithmetic_intensity,
    attention_flops,
    decode_step_bytes,
    forward_flops,
    kv_cache_bytes,
    matmul_bytes,
    matmul_flops,
    matmul_params,
    ridge_point,
    roofline_time,
    weight_bytes_read,
)
from .course.hardware import (
    GPU_SPECS,
    Ceilings,
    GPUSpec,
    ceilings_drift,
    find_gpu_spec,
    gpu_spec,
    measure_bandwidth,
    measure_ceilings,
    measure_matmul_flops,
    measure_peak_flops,
    measure_read_bandwidth,
)
from .course.kv_cache import cache_nbytes, cache_tensors, rewind_cache
from .course.lab import Lab, setup
from .course.latency import TokenTimes, percentiles
from .course.phases import (
    GenerationResult,
    TokenTimer,
    decode_step,
    fixed_context_step,
    greedy_generate,
    prefill,
    static_cache,
    timed_generate,
    timed_model_generate,
)
from .course.serving.metrics import goodput, serving_metrics
from .course.serving.requests import Request, Served, poisson_requests, prompt_text
from .course.serving.server import (
    Server,
    ServerError,
    benchmark_server,
    check_server,
    save_lab_model,
    save_model_folder,
    serve_model,
    stream_completion,
)
from .course.step_time import Calibration, calibrate, calibration_drift, predict_step_time, step_time_breakdown
from .exercises import check_exercise
from .plumbing.checks import check, check_answer, check_choice, check_model, read_check_log, your_answer
from .plumbing.class_export import export_results
from .plumbing.class_merge import class_summary, merge_results
from .plumbing.compat import cache_kwargs, get_cache
from .plumbing.contention import Contention
from .plumbing.contention import watch as watch_contention
from .plumbing.device import (
    as_device,
    bytes_per_element,
    default_dtype,
    device_memory_bytes,
    device_name,
    native_bf16,
    pick_device,
    synchronize,
)
from .plumbing.fits import fit_line, fit_loglog_slope, fit_power
from .plumbing.memory import (
    MemoryChange,
    OverBudget,
    check_budget,
    free_memory,
    is_oom,
    measure_memory,
    memory_budget_bytes,
    minor_page_faults,
    page_fault_seconds,
    record_oom,
    tensor_bytes,
)
from .plumbing.model_specs import expected_experts_hit
from .plumbing.models import (
    MODEL_SPECS,
    ModelSpec,
    architecture_spec,
    build_config,
    cache_bytes,
    gpt2_style_config,
    load_model,
    model_spec,
    random_model,
    random_prompt,
    spec_from_config,
    weights_are_pretrained,
)
from .plumbing.plots import new_figure, plain_log_ticks, plot_measured_vs_predicted, plot_reference, plot_roofline
from .plumbing.profile import PROFILES, by_profile, current_profile
from .plumbing.results import error_lean, lab_dir, load_reference, prediction_errors, run_info, save_results
from .plumbing.seat import Seat, find_seat, usable_cores
from .plumbing.sweeps import interleaved_sweep, sweep_round_ratio
from .plumbing.tables import show_table
from .plumbing.timing import Timing, benchmark, format_seconds, round_ratio, time_alternating, time_once
from .plumbing.tokenizer import offline_tokenizer
from .plumbing.widgets import interact_with
from .plumbing.working_set import (
    CacheSize,
    WorkingSet,
    copies_past_cache,
    measure_cache_size,
    reported_cache_bytes,
    working_set,
)

__all__ = [name for name in dir() if not name.startswith("_")]
