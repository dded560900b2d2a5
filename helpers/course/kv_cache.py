"""Chapter 4, the KV cache: the bytes a real cache object holds, and planning KV memory (contiguous vs paged).

The size formula itself, `kv_cache_bytes`, lives in `formulas`. The plans here count weights plus cache, and
take anything else (the activation peak, the CUDA context, CUDA graphs) out only as a stated `reserve_bytes`:
with none, a plan's batch or capacity is an upper bound. vLLM's `--gpu-memory-utilization` is the whole budget
of an instance; it profiles a forward pass and takes the weights, that activation peak, non-torch allocations and
the CUDA-graph pool out of it, and only the rest holds KV blocks (`vllm/v1/worker/gpu_worker.py`,
`determine_available_memory`). Capacities are binary, as the
device reports them: `GPUSpec.memory_bytes` is what the driver reports for that card (an H100 80GB: 81,559 MiB;
a T4 with ECC: 15,360 MiB), and on a real GPU `device_memory_bytes` gives the exact figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from transformers.cache_utils import Cache

from ..plumbing.compat import crop_cache
from ..plumbing.models import ModelSpec
from ..plumbing.validate import non_negative, one_of, positive_int
from .formulas import attention_flops, forward_flops, kv_cache_bytes
from .hardware import GPUSpec

# ------------------------------------------------------------------ the cache object


def cache_tensors(cache: Cache) -> list[torch.Tensor]:
    """The key and value tensors a transformers cache holds, layer by layer."""
    tensors: list[torch.Tensor] = []
    layers = getattr(cache, "layers", None)
    if layers is not None:  # transformers >= 4.56: one CacheLayer per layer with .keys / .values
        for layer in layers:
            for name in ("keys", "values"):
                t = getattr(layer, name, None)
                if isinstance(t, torch.Tensor) and t.numel() > 0:
                    tensors.append(t)
        return tensors
    for name in ("key_cache", "value_cache"):  # older layouts
        tensors.extend(t for t in getattr(cache, name, []) if isinstance(t, torch.Tensor))
    if not tensors:
        raise ValueError(f"cannot find key/value tensors in a {type(cache).__name__}")
    return tensors


def cache_nbytes(cache: Cache) -> int:
    """Bytes of the key and value tensors a transformers cache object actually holds."""
    return sum(t.nbytes for t in cache_tensors(cache))


def rewind_cache(cache: object, length: int) -> None:
    """Drop the tokens appended to a transformers cache after its first `length` (so a step can be re-timed)."""
    extra = cache.get_seq_length() - length
    if extra < 0:
        raise ValueError(f"the cache holds {cache.get_seq_length()} tokens, fewer than length={length}")
    if extra:
        crop_cache(cache, extra)


def generation_flops(spec: ModelSpec, n_tokens: int, cached: bool) -> dict[str, int]:
    """FLOPs of producing tokens 1..n_tokens one by one (forward_flops summed over the steps), matmul vs attention.

    With a cache step t is a forward of 1 token over t; without one it is a forward of all t tokens."""
    steps = range(1, positive_int("n_tokens", n_tokens) + 1)
    total = sum(forward_flops(spec, 1, t) if cached else forward_flops(spec, t) for t in steps)
    attention = sum(attention_flops(spec, 1 if cached else t, t) for t in steps)
    return {"matmul": total - attention, "attention": attention, "total": total}


# ------------------------------------------------------------------ memory planning

# Sliding-window attention keeps only the last `window` tokens' keys and values, so a sequence's cache stops
# growing there. mistralai/Mistral-7B-v0.1/config.json: "sliding_window": 4096.
SLIDING_WINDOW: dict[str, int] = {"mistral-7b": 4096}


def cached_tokens(model: ModelSpec, context: int) -> int:
    """Tokens of one sequence's cache at `context`: all of them, or at most the model's sliding window."""
    context = positive_int("context", context)
    return min(context, SLIDING_WINDOW.get(model.name, context))


CACHE_DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


def cache_dtype_bytes(name: str) -> int:
    """Bytes per cached element for a cache dtype name: fp32 4, bf16/fp16 2, fp8/int8 1."""
    return CACHE_DTYPE_BYTES[one_of("name", name, sorted(CACHE_DTYPE_BYTES))]


def max_batch(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: int, context: int) -> int:
    """Largest batch whose KV cache at `context` tokens fits in memory after the weights (0 if none)."""
    memory_bytes = non_negative("memory_bytes", memory_bytes)
    weight_bytes = non_negative("weight_bytes", weight_bytes)
    per_request = positive_int("kv_bytes_per_token", kv_bytes_per_token) * positive_int("context", context)
    return max(0, math.floor((memory_bytes - weight_bytes) / per_request))


def max_context(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: int, batch_size: int) -> int:
    """Longest context (tokens per sequence) whose KV cache for `batch_size` fits after the weights (0 if none)."""
    memory_bytes = non_negative("memory_bytes", memory_bytes)
    weight_bytes = non_negative("weight_bytes", weight_bytes)
    per_position = positive_int("kv_bytes_per_token", kv_bytes_per_token) * positive_int("batch_size", batch_size)
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
    weights = positive_int("n_params", n_params) * positive_int("weight_bytes_per_param", weight_bytes_per_param)
    return MemoryPlan(
        kv_bytes=kv_cache_bytes(n_layers, n_kv_heads, head_dim, context, batch_size, cache_bytes),
        weight_bytes=weights,
        memory_bytes=non_negative("memory_bytes", memory_bytes),
        max_batch=max_batch(memory_bytes, weights, per_token, context),
        max_context=max_context(memory_bytes, weights, per_token, batch_size),
    )


def sample_request_lengths(n_requests: int, max_len: int, mean_prompt: int = 300, mean_output: int = 200,
                           seed: int = 0) -> np.ndarray:
    """Token counts (prompt + output) of a stream of requests: uniform prompts, exponential outputs, capped."""
    n_requests = positive_int("n_requests", n_requests)
    max_len = positive_int("max_len", max_len)
    positive_int("mean_prompt", mean_prompt)
    positive_int("mean_output", mean_output)
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
    max_len = positive_int("max_len", max_len)
    block_size = positive_int("block_size", block_size)
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
    pool_tokens = positive_int("pool_tokens", pool_tokens)
    lengths = _check_lengths(lengths, positive_int("max_len", max_len))
    reserved = reserved_tokens(lengths, scheme, max_len, block_size)
    n_fit = int(np.searchsorted(np.cumsum(reserved), pool_tokens, side="right"))
    return PoolResult(scheme, block_size if scheme == "paged" else max_len, n_fit,
                      int(lengths[:n_fit].sum()), int(reserved[:n_fit].sum()))


def pool_block_map(lengths: np.ndarray, pool_tokens: int, scheme: str, max_len: int, block_size: int = 16,
                   seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The pool as `block_size`-token blocks: which request owns each (-1 free) and the share of it holding tokens.

    Contiguous slabs sit side by side in arrival order; paged blocks go wherever the free list has one (a
    shuffled list here, as blocks freed by finished requests are scattered in a running server)."""
    n_blocks = positive_int("pool_tokens", pool_tokens) // positive_int("block_size", block_size)
    result = fill_pool(lengths, n_blocks * block_size, scheme, max_len, block_size)
    owner, used = np.full(n_blocks, -1), np.zeros(n_blocks)
    free = np.arange(n_blocks) if scheme == "contiguous" else np.random.default_rng(seed).permutation(n_blocks)
    start = 0
    for request, length in enumerate(np.asarray(lengths)[:result.requests_fit]):
        reserved = -(-int(reserved_tokens(np.array([length]), scheme, max_len, block_size)[0]) // block_size)
        blocks = free[start:start + reserved]
        start += reserved
        owner[blocks] = request
        used[blocks] = np.clip((int(length) - block_size * np.arange(len(blocks))) / block_size, 0, 1)
    return owner, used


# vLLM's --gpu-memory-utilization default in current releases (0.9 before): the share of the GPU the whole
# instance may use (weights, activation peak, non-torch allocations, CUDA graphs and KV blocks), not the KV share.
VLLM_GPU_MEMORY_UTILIZATION = 0.92


def kv_budget_bytes(memory_bytes: float, weight_bytes: float, memory_fraction: float = VLLM_GPU_MEMORY_UTILIZATION,
                    reserve_bytes: float = 0.0) -> float:
    """Bytes left for KV blocks, as vLLM sizes them: fraction x memory - weights - reserve (0 if negative).

    `reserve_bytes` stands for what vLLM measures at start-up and also takes out (activation peak of a profiling
    forward, non-torch allocations, the CUDA-graph pool); with the default 0 the result is an upper bound."""
    if not 0 < memory_fraction <= 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}")
    room = non_negative("memory_bytes", memory_bytes) * memory_fraction
    return max(0.0, room - non_negative("weight_bytes", weight_bytes) - non_negative("reserve_bytes", reserve_bytes))


def kv_capacity_tokens(model: ModelSpec, gpu: GPUSpec, memory_fraction: float = VLLM_GPU_MEMORY_UTILIZATION,
                       bytes_per_elem: int = 2, tensor_parallel: int = 1, bytes_per_param: int = 2,
                       reserve_bytes: float = 0.0) -> int:
    """KV tokens that fit in `memory_fraction` of each GPU's memory after the weights and `reserve_bytes`.

    An upper bound with the default `reserve_bytes=0`: a real engine also holds activations and CUDA graphs
    inside the same fraction (`kv_budget_bytes`)."""
    per_gpu = tensor_parallel_memory(model, tensor_parallel, 1, 1, bytes_per_param, bytes_per_elem)
    free = kv_budget_bytes(gpu.memory_bytes, per_gpu["weights_bytes"], memory_fraction, reserve_bytes)
    return int(free // per_gpu["kv_bytes"])


def tensor_parallel_memory(model: ModelSpec, tp: int, seq_len: int, batch_size: int = 1,
                           bytes_per_param: int = 2, bytes_per_elem: int = 2) -> dict[str, float]:
    """Bytes per GPU under tensor parallelism: weights / tp; KV heads split, replicated when tp > KV heads."""
    positive_int("tp", tp)
    if tp > model.n_heads or model.n_heads % tp:
        raise ValueError(f"tp must divide {model.name}'s {model.n_heads} attention heads, got {tp}")
    kv_heads = math.ceil(model.n_kv_heads / tp)  # tp > kv heads: each GPU keeps a copy of one head
    kv = kv_cache_bytes(model.n_layers, kv_heads, model.head_dim, seq_len, batch_size, bytes_per_elem)
    weights = model.weight_bytes(bytes_per_param) / tp
    return {"tp": tp, "weights_bytes": weights, "kv_heads_per_gpu": kv_heads, "kv_bytes": kv,
            "total_bytes": weights + kv}
