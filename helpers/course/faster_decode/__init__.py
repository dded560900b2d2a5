"""Chapter 7, faster decode: what each technique changes in the step model, and the loops that measure it.

Each technique changes one term of chapter 8's step model: weight-only int8 the bytes (or the kernel) a
matmul runs, compilation the operator count, speculative decoding and prompt lookup the tokens one forward
yields, prefix caching the tokens a prefill runs, a quantised KV cache the cache's bytes.
"""

from ..phases import fixed_context_step, static_cache
from .baseline import scaled_prediction, shifted_prediction, small_llama_spec
from .compiled import OpRecorder, compiled_call_cost, guard_count, static_greedy, without_guards
from .plot import plot_speedups
from .prefix import check_prefix, greedy_continue, prefill_with_prefix
from .quantize import (
    fp8_cache,
    fp8_cache_breakdown,
    fp8_cache_nbytes,
    fp8_dequantize_rate,
    linear_weights,
    quantize_fbgemm,
    quantize_torchao,
    relative_error,
    rotating_linears,
    tokens_that_fit,
    torchao_call_overhead_seconds,
    torchao_int8_extra,
)
from .speculative import (
    ForwardCounter,
    check_speculation,
    expected_tokens_per_verification,
    forwards_of,
    generation_time,
    predict_verification_time,
    speculative_generate,
    speculative_speedup,
    synthetic_draft,
)

decode_step_fn = fixed_context_step  # chapter 7's name for chapter 2's step at a fixed context

__all__ = ["ForwardCounter", "OpRecorder", "check_prefix", "check_speculation", "compiled_call_cost",
           "decode_step_fn", "expected_tokens_per_verification", "fixed_context_step", "forwards_of", "fp8_cache",
           "fp8_cache_breakdown", "fp8_cache_nbytes", "fp8_dequantize_rate", "generation_time", "greedy_continue",
           "guard_count", "linear_weights", "plot_speedups", "predict_verification_time",
           "prefill_with_prefix", "quantize_fbgemm", "quantize_torchao", "relative_error",
           "rotating_linears", "scaled_prediction", "shifted_prediction", "small_llama_spec", "speculative_generate",
           "speculative_speedup",
           "static_cache", "static_greedy", "synthetic_draft", "tokens_that_fit", "torchao_call_overhead_seconds",
           "torchao_int8_extra", "without_guards"]
