"""KV memory planning: how many requests and tokens fit on a GPU, and contiguous vs paged allocation.

Introduced in notebook 4 (the KV cache). All sizes are in bytes or tokens; memory is what is left for
weights plus cache (activations, the CUDA context and the allocator's slack are left out).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .kv_cache import kv_cache_bytes

CACHE_DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


def _positive_int(name: str, value: object) -> int:
    """Check that `value` is an int >= 1, naming the argument and the range in the error."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _non_negative(name: str, value: object) -> float:
    """Check that `value` is a real number >= 0, naming the argument and the range in the error."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return float(value)


def cache_dtype_bytes(name: str) -> int:
    """Bytes per cached element for a cache dtype name: fp32 4, bf16/fp16 2, fp8/int8 1."""
    if name not in CACHE_DTYPE_BYTES:
        raise ValueError(f"name must be one of {sorted(CACHE_DTYPE_BYTES)}, got {name!r}")
    return CACHE_DTYPE_BYTES[name]


def max_batch(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: int, context: int) -> int:
    """Largest batch whose KV cache at `context` tokens fits in memory after the weights (0 if none)."""
    memory_bytes = _non_negative("memory_bytes", memory_bytes)
    weight_bytes = _non_negative("weight_bytes", weight_bytes)
    per_request = _positive_int("kv_bytes_per_token", kv_bytes_per_token) * _positive_int("context", context)
    return max(0, math.floor((memory_bytes - weight_bytes) / per_request))


def max_context(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: int, batch_size: int) -> int:
    """Longest context (tokens per sequence) whose KV cache for `batch_size` fits after the weights (0 if none)."""
    memory_bytes = _non_negative("memory_bytes", memory_bytes)
    weight_bytes = _non_negative("weight_bytes", weight_bytes)
    per_position = _positive_int("kv_bytes_per_token", kv_bytes_per_token) * _positive_int("batch_size", batch_size)
    return max(0, math.floor((memory_bytes - weight_bytes) / per_position))


@dataclass(frozen=True)
class MemoryPlan:
    """Weights + KV cache of one configuration against a memory budget."""

    kv_bytes: int
    weight_bytes: int
    memory_bytes: float
    max_batch: int  # at the plan's context
    max_context: int  # at the plan's batch

    @property
    def total_bytes(self) -> int:
        """Weights plus KV cache."""
        return self.kv_bytes + self.weight_bytes

    @property
    def fits(self) -> bool:
        """True when weights and cache together fit in the memory budget."""
        return self.total_bytes <= self.memory_bytes


def plan_memory(n_layers: int, n_kv_heads: int, head_dim: int, n_params: int, context: int, batch_size: int,
                cache_bytes: int, weight_bytes_per_param: int, memory_bytes: float) -> MemoryPlan:
    """KV bytes, weight bytes, and the largest batch / context that fit in `memory_bytes`."""
    per_token = kv_cache_bytes(n_layers, n_kv_heads, head_dim, 1, 1, cache_bytes)
    weights = _positive_int("n_params", n_params) * _positive_int("weight_bytes_per_param", weight_bytes_per_param)
    return MemoryPlan(
        kv_bytes=kv_cache_bytes(n_layers, n_kv_heads, head_dim, context, batch_size, cache_bytes),
        weight_bytes=weights,
        memory_bytes=_non_negative("memory_bytes", memory_bytes),
        max_batch=max_batch(memory_bytes, weights, per_token, context),
        max_context=max_context(memory_bytes, weights, per_token, batch_size),
    )


def sample_request_lengths(n_requests: int, max_len: int, mean_prompt: int = 300, mean_output: int = 200,
                           seed: int = 0) -> np.ndarray:
    """Token counts (prompt + output) of a stream of requests: uniform prompts, exponential outputs, capped."""
    n_requests = _positive_int("n_requests", n_requests)
    max_len = _positive_int("max_len", max_len)
    _positive_int("mean_prompt", mean_prompt)
    _positive_int("mean_output", mean_output)
    rng = np.random.default_rng(seed)
    prompts = rng.integers(1, 2 * mean_prompt, size=n_requests, endpoint=True)
    outputs = np.ceil(rng.exponential(mean_output, size=n_requests)).astype(int)
    return np.minimum(prompts + outputs, max_len)


def _check_lengths(lengths: np.ndarray, max_len: int) -> np.ndarray:
    """Request lengths as an int array, each in 1..max_len."""
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size == 0 or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"lengths must be a non-empty 1-D sequence of integers, got {lengths!r}")
    if lengths.min() < 1 or lengths.max() > max_len:
        raise ValueError(f"lengths must each be in [1, max_len={max_len}], got {lengths.min()}..{lengths.max()}")
    return lengths


def reserved_tokens(lengths: np.ndarray, scheme: str, max_len: int, block_size: int = 16) -> np.ndarray:
    """Cache slots each request holds: `max_len` if contiguous, whole blocks of `block_size` if paged."""
    max_len = _positive_int("max_len", max_len)
    block_size = _positive_int("block_size", block_size)
    lengths = _check_lengths(lengths, max_len)
    if scheme == "contiguous":
        return np.full_like(lengths, max_len)
    if scheme == "paged":
        return -(-lengths // block_size) * block_size  # ceil(length / block) blocks
    raise ValueError(f"scheme must be one of ('contiguous', 'paged'), got {scheme!r}")


@dataclass(frozen=True)
class PoolResult:
    """How one allocation scheme fills a KV pool with a stream of requests."""

    scheme: str
    block_size: int
    requests_fit: int
    tokens_used: int  # tokens the admitted requests really hold
    tokens_reserved: int  # slots set aside for them

    @property
    def waste_fraction(self) -> float:
        """Share of the reserved slots that hold no token."""
        return 1 - self.tokens_used / self.tokens_reserved if self.tokens_reserved else 0.0

    @property
    def waste_per_request(self) -> float:
        """Empty slots per admitted request, on average."""
        return (self.tokens_reserved - self.tokens_used) / self.requests_fit if self.requests_fit else 0.0


def fill_pool(lengths: np.ndarray, pool_tokens: int, scheme: str, max_len: int, block_size: int = 16) -> PoolResult:
    """Admit requests in arrival order while their reserved slots fit in a pool of `pool_tokens` slots."""
    pool_tokens = _positive_int("pool_tokens", pool_tokens)
    lengths = _check_lengths(lengths, _positive_int("max_len", max_len))
    reserved = reserved_tokens(lengths, scheme, max_len, block_size)
    n_fit = int(np.searchsorted(np.cumsum(reserved), pool_tokens, side="right"))
    return PoolResult(scheme, block_size if scheme == "paged" else max_len, n_fit,
                      int(lengths[:n_fit].sum()), int(reserved[:n_fit].sum()))
