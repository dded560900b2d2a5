"""Plumbing shared by the Transformer Inference Lab notebooks: device, timing, memory, models, formulas."""

from .checks import check, check_answer, check_choice
from .compat import cache_kwargs, get_cache
from .device import as_device, bytes_per_element, default_dtype, device_name, pick_device, synchronize
from .formulas import (
                       arithmetic_intensity,
                       attention_flops,
                       forward_flops,
                       matmul_bytes,
                       matmul_flops,
                       matmul_params,
                       roofline_time,
)
from .generation import GenerationResult, TokenTimer, timed_generate, timed_model_generate
from .hardware import (
                       GPU_SPECS,
                       Ceilings,
                       GPUSpec,
                       find_gpu_spec,
                       gpu_spec,
                       measure_bandwidth,
                       measure_ceilings,
                       measure_matmul_flops,
                       ridge_point,
)
from .kv_cache import cache_nbytes, cache_tensors, kv_cache_bytes
from .lab import Lab, setup
from .memory import MemoryChange, free_memory, is_oom, measure_memory, tensor_bytes
from .models import MODEL_SPECS, ModelSpec, build_config, load_model, model_spec, random_model, weights_are_pretrained
from .plots import new_figure, plot_reference, plot_roofline
from .profile import PROFILES, by_profile, current_profile
from .results import lab_dir, load_reference, run_info, save_results
from .timing import Timing, benchmark, format_seconds, time_alternating, time_once
from .tokenizer import offline_tokenizer
from .widgets import interact_with

__all__ = [name for name in dir() if not name.startswith("_")]
