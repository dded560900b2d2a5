"""Chapter 4, the KV cache: the cache itself (`cache`), planning KV memory (`memory_plan`), and how contiguous and
paged allocation fill a pool (`paged_pool`)."""

from .cache import cache_nbytes, cache_tensors, generation_flops, rewind_cache
from .memory_plan import (
    CACHE_DTYPE_BYTES,
    SLIDING_WINDOW,
    VLLM_GPU_MEMORY_UTILIZATION,
    MemoryPlan,
    cache_dtype_bytes,
    cached_tokens,
    kv_budget_bytes,
    kv_capacity_tokens,
    longest_context,
    max_batch,
    max_context,
    plan_for,
    plan_memory,
    tensor_parallel_memory,
    tokens_that_fit,
)
from .paged_pool import PoolResult, fill_pool, pool_block_map, reserved_tokens, sample_request_lengths

__all__ = ["CACHE_DTYPE_BYTES", "SLIDING_WINDOW", "VLLM_GPU_MEMORY_UTILIZATION", "MemoryPlan", "PoolResult",
           "cache_dtype_bytes", "cache_nbytes", "cache_tensors", "cached_tokens", "fill_pool", "generation_flops",
           "kv_budget_bytes", "kv_capacity_tokens", "longest_context", "max_batch", "max_context", "plan_for",
           "plan_memory", "pool_block_map", "reserved_tokens", "rewind_cache", "sample_request_lengths",
           "tensor_parallel_memory", "tokens_that_fit"]
