"""helpers' top-level names are an API that learners and instructors call: every name it offered before the
serving package was split into its three parts still imports (a name that moves keeps an alias)."""

import helpers

PUBLIC_NAMES = [  # helpers.__all__ as of commit b5ac465
    "CACHE_COPY_PASSES", "CacheSize", "Calibration", "Ceilings", "Contention", "GPUSpec", "GPU_SPECS",
    "GenerationResult", "Lab", "MODEL_SPECS", "MemoryChange", "ModelSpec", "OverBudget", "PROFILES", "Request",
    "Seat", "Served", "Server", "ServerError", "Timing", "TokenTimer", "TokenTimes", "WorkingSet",
    "architecture_spec", "arithmetic_intensity", "as_device", "attention_flops", "benchmark",
    "benchmark_server", "build_config", "by_profile", "bytes_per_element", "cache_bytes", "cache_kwargs",
    "cache_nbytes", "cache_tensors", "calibrate", "calibration_drift", "check", "check_answer", "check_budget",
    "check_choice", "check_exercise", "check_model", "check_server", "class_summary", "copies_past_cache",
    "course", "current_profile", "decode_step", "decode_step_bytes", "default_dtype", "device_memory_bytes",
    "device_name", "error_lean", "exercises", "expected_experts_hit", "export_results", "find_gpu_spec",
    "find_seat", "fit_line", "fit_loglog_slope", "fit_power", "fixed_context_step", "format_seconds",
    "forward_flops", "free_memory", "get_cache", "goodput", "gpt2_style_config", "gpu_spec", "greedy_generate",
    "interact_with", "interleaved_sweep", "is_oom", "kv_cache_bytes", "lab_dir", "load_model", "load_reference",
    "matmul_bytes", "matmul_flops", "matmul_params", "measure_bandwidth", "measure_cache_size",
    "measure_ceilings", "measure_matmul_flops", "measure_memory", "measure_peak_flops",
    "measure_read_bandwidth", "memory_budget_bytes", "merge_results", "minor_page_faults", "model_spec",
    "native_bf16", "new_figure", "offline_tokenizer", "page_fault_seconds", "percentiles", "pick_device",
    "plain_log_ticks", "plot_measured_vs_predicted", "plot_reference", "plot_roofline", "plumbing",
    "poisson_requests", "predict_step_time", "prediction_errors", "prefill", "prompt_text", "random_model",
    "random_prompt", "read_check_log", "record_oom", "reported_cache_bytes", "rewind_cache", "ridge_point",
    "roofline_time", "round_ratio", "run_info", "save_lab_model", "save_model_folder", "save_results",
    "serve_model", "serving_metrics", "setup", "show_table", "spec_from_config", "static_cache",
    "step_time_breakdown", "stream_completion", "sweep_round_ratio", "synchronize", "tensor_bytes",
    "time_alternating", "time_once", "timed_generate", "timed_model_generate", "usable_cores",
    "watch_contention", "weight_bytes_read", "weights_are_pretrained", "working_set", "your_answer"
]


def test_every_public_name_still_imports():
    missing = [name for name in PUBLIC_NAMES if not hasattr(helpers, name)]
    assert not missing, f"helpers no longer offers {missing}: alias them where they moved"
