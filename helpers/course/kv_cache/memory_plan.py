"""Chapter 4, planning KV memory: how many tokens, sequences or how long a context fit beside the weights.

`tokens_that_fit` is the one count of KV tokens that fit in some memory; the rest build on it. A ModelSpec's cache
comes from `cache_bytes` (full, sliding and latent layers, each as a real cache holds them: `plan_for`); the dense
`plan_memory` takes the numbers of `formulas.kv_cache_bytes`. The plans count weights plus cache, and take anything
else (the activation peak, the CUDA context, CUDA graphs) out only as a stated `reserve_bytes`: with none, a plan's
batch or capacity is an upper bound. vLLM's `--gpu-memory-utilization` is the whole budget of an instance; it
profiles a forward pass and takes the weights, that activation peak, non-torch allocations and the CUDA-graph pool
out of it, and only the rest holds KV blocks (`vllm/v1/worker/gpu_worker.py`, `determine_available_memory`).
Capacities are binary, as the device reports them: `GPUSpec.memory_bytes` is what the driver reports for that card
(an H100 80GB: 81,559 MiB; a T4 with ECC: 15,360 MiB), and on a real GPU `device_memory_bytes` gives the exact
figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...plumbing.models import MODEL_SPECS, ModelSpec, cache_bytes
from ...plumbing.validate import non_negative, one_of, positive, positive_int
from ..formulas import kv_cache_bytes
from ..hardware import GPUSpec

# The registry's models whose every layer attends over a sliding window, and the window (Mistral-7B's config.json:
# "sliding_window": 4096), so a sequence's cache stops growing there. Hybrids (Gemma 3, GPT-OSS) also have full
# layers, whose cache keeps growing: `cache_bytes` counts both kinds layer by layer.
SLIDING_WINDOW: dict[str, int] = {name: s.sliding_window for name, s in MODEL_SPECS.items() if s.attention == "sliding"}


def cached_tokens(model: ModelSpec, context: int) -> int:
    """Tokens of one sequence's cache at `context` in its fullest layer: all of them, or window - 1 at most when
    every layer slides (transformers keeps window - 1: the new token makes the window)."""
    context = positive_int("context", context)
    return max(model.cached_tokens(kind, context) for kind in model.layer_kinds())


CACHE_DTYPE_BYTES: dict[str, int] = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


def cache_dtype_bytes(name: str) -> int:
    """Bytes per cached element for a cache dtype name: fp32 4, bf16/fp16 2, fp8/int8 1."""
    return CACHE_DTYPE_BYTES[one_of("name", name, sorted(CACHE_DTYPE_BYTES))]


def tokens_that_fit(memory_bytes: float, kv_bytes_per_token: float) -> int:
    """KV-cache tokens that `memory_bytes` hold at `kv_bytes_per_token` each (0 if none)."""
    return max(0, math.floor(memory_bytes / positive("kv_bytes_per_token", kv_bytes_per_token)))


def max_batch(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: int, context: int) -> int:
    """Largest batch whose KV cache at `context` tokens fits in memory after the weights (0 if none)."""
    room = non_negative("memory_bytes", memory_bytes) - non_negative("weight_bytes", weight_bytes)
    per_request = positive_int("kv_bytes_per_token", kv_bytes_per_token) * positive_int("context", context)
    return tokens_that_fit(room, per_request)  # a request's `context` tokens, as one unit


def max_context(memory_bytes: float, weight_bytes: float, kv_bytes_per_token: int, batch_size: int) -> int:
    """Longest context (tokens per sequence) whose KV cache for `batch_size` fits after the weights (0 if none)."""
    room = non_negative("memory_bytes", memory_bytes) - non_negative("weight_bytes", weight_bytes)
    per_position = positive_int("kv_bytes_per_token", kv_bytes_per_token) * positive_int("batch_size", batch_size)
    return tokens_that_fit(room, per_position)  # one position of every sequence, as one unit


@dataclass(frozen=True)
class MemoryPlan:
    """Weights + KV cache of one configuration against a memory budget."""

    kv_bytes: int
    weight_bytes: int
    memory_bytes: float
    max_batch: int  # at the plan's context
    max_context: int | float  # at the plan's batch; inf when the cache stops growing (every layer slides) and fits

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


def longest_context(model: ModelSpec, memory_bytes: float, weight_bytes: float, batch_size: int,
                    bytes_per_elem: int = 2) -> int | float:
    """Longest context whose cache for `batch_size` sequences fits after the weights, layer kind by layer kind
    (0 if none; inf when every layer slides and the full windows fit).

    Until the windows fill the cache grows by `kv_bytes_per_token` a token; after, by its full and latent layers'."""
    room = non_negative("memory_bytes", memory_bytes) - non_negative("weight_bytes", weight_bytes)
    full_from = max(model.sliding_window - 1, 1)  # every window is full from this length on
    at_full = cache_bytes(model, full_from, batch_size, bytes_per_elem)
    if at_full > room:  # before the windows fill, every layer grows alike
        return tokens_that_fit(room, model.kv_bytes_per_token(bytes_per_elem) * batch_size)
    growth = cache_bytes(model, full_from + 1, batch_size, bytes_per_elem) - at_full
    return math.inf if growth == 0 else full_from + tokens_that_fit(room - at_full, growth)


def plan_for(model: ModelSpec, context: int, batch_size: int, memory_bytes: float, bytes_per_elem: int = 2,
             bytes_per_param: int = 2) -> MemoryPlan:
    """`plan_memory` for a model of any architecture: one sequence's KV bytes from `cache_bytes` (full, sliding and
    latent layers), weights from its parameter count."""
    weights = model.weight_bytes(positive_int("bytes_per_param", bytes_per_param))
    per_sequence = cache_bytes(model, context, 1, bytes_per_elem)
    room = non_negative("memory_bytes", memory_bytes) - weights
    return MemoryPlan(
        kv_bytes=per_sequence * positive_int("batch_size", batch_size),
        weight_bytes=weights,
        memory_bytes=memory_bytes,
        max_batch=tokens_that_fit(room, per_sequence),
        max_context=longest_context(model, memory_bytes, weights, batch_size, bytes_per_elem),
    )


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
    """KV tokens that fit in `memory_fraction` of each GPU's memory after the weights and `reserve_bytes`, each
    token counted in every layer (as before a sliding window fills: past it, long sequences take fewer).

    An upper bound with the default `reserve_bytes=0`: a real engine also holds activations and CUDA graphs
    inside the same fraction (`kv_budget_bytes`)."""
    per_gpu = tensor_parallel_memory(model, tensor_parallel, 1, 1, bytes_per_param, bytes_per_elem)
    free = kv_budget_bytes(gpu.memory_bytes, per_gpu["weights_bytes"], memory_fraction, reserve_bytes)
    return tokens_that_fit(free, per_gpu["kv_bytes"])


def tensor_parallel_memory(model: ModelSpec, tp: int, seq_len: int, batch_size: int = 1,
                           bytes_per_param: int = 2, bytes_per_elem: int = 2) -> dict[str, float]:
    """Bytes per GPU under tensor parallelism: weights / tp; KV heads split, replicated when tp > KV heads.

    A latent cache (MLA) is one vector per token that every head reads, so each GPU keeps all of it; sliding
    layers hold at most their window on every GPU (`cache_bytes`)."""
    positive_int("tp", tp)
    if tp > model.n_heads or model.n_heads % tp:
        raise ValueError(f"tp must divide {model.name}'s {model.n_heads} attention heads, got {tp}")
    # tp > kv heads: each GPU keeps a copy of one head; a latent vector is shared by all heads
    kv_heads = 1 if model.attention == "latent" else math.ceil(model.n_kv_heads / tp)
    kv = cache_bytes(replace(model, n_kv_heads=kv_heads), seq_len, batch_size, bytes_per_elem)
    weights = model.weight_bytes(bytes_per_param) / tp
    return {"tp": tp, "weights_bytes": weights, "kv_heads_per_gpu": kv_heads, "kv_bytes": kv,
            "total_bytes": weights + kv}
