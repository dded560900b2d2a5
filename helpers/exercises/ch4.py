"""Chapter 4's exercises: expected answers computed from the lab's formulas and plans, never typed in."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..course.hardware import gpu_spec
from ..course.kv_cache import plan_for, reserved_tokens
from ..plumbing.models import cache_bytes, model_spec
from . import Numeric

GPU_80GB = 81_559 * 2**20  # an "80 GB" H100 as its driver reports it (nvidia-smi: 81,559 MiB), a little under 80 GiB


def _a100_batch(model: str, context: int, cache_bytes: int) -> int:
    """Largest batch of `context`-token sequences (bf16 weights) in all of an A100 80GB's reported memory."""
    memory = gpu_spec("A100 80GB SXM").memory_bytes
    return plan_for(model_spec(model), context, 1, memory, bytes_per_elem=cache_bytes).max_batch


def _kv_gib(model: str, context: int) -> float:
    """GiB of bf16 KV cache for one `context`-token sequence of a registry model, layer kind by layer kind."""
    return cache_bytes(model_spec(model), context) / 2**30


def _cache_mib(kv_bytes_per_token: int, tokens: int, batch: int) -> float:
    """MiB of a cache holding `tokens` tokens for each of `batch` sequences, from the bytes of one token."""
    return kv_bytes_per_token * tokens * batch / 2**20


def _gemma_window_saving(context: int = 65_536) -> float:
    """How many times smaller Gemma-3-27B's bf16 cache is at `context` with its sliding layers than all-full."""
    hybrid = model_spec("gemma-3-27b")
    return cache_bytes(replace(hybrid, layer_types=()), context) / cache_bytes(hybrid, context)


EXERCISES = {
    "4.1": Numeric(expected=lambda **_: _kv_gib("llama-3-70b", 131_072), rel_tol=0.02, unit="GiB"),
    "4.2": Numeric(expected=lambda **_: _a100_batch("llama-2-7b", 4096, 2), rel_tol=0.001, unit="sequences"),
    "4.3": Numeric(expected=lambda **_: _a100_batch("llama-3-8b", 32_768, 1), rel_tol=0.001, unit="sequences"),
    "4.4": Numeric(expected=lambda **_: float(reserved_tokens(np.array([1000]), "paged", 4096, 16)[0] - 1000),
                   rel_tol=0.001, unit="slots"),
    "4.5": Numeric(expected=_cache_mib, rel_tol=0.01, unit="MiB"),
    "4.7": Numeric(expected=lambda **_: _kv_gib("llama-3-70b", 32_768), rel_tol=0.02, unit="GiB"),
    "4.8": Numeric(expected=lambda **_: _gemma_window_saving(), rel_tol=0.02, unit="x"),
}
