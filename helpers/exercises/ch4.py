"""Chapter 4's exercises: expected answers computed from the lab's formulas and plans, never typed in."""

from __future__ import annotations

import numpy as np

from ..course.formulas import kv_cache_bytes
from ..course.hardware import gpu_spec
from ..course.kv_cache import max_batch, reserved_tokens
from ..plumbing.models import model_spec
from . import Numeric

GPU_80GB = 81_559 * 2**20  # an "80 GB" H100 as its driver reports it (nvidia-smi: 81,559 MiB), a little under 80 GiB


def _a100_batch(model: str, context: int, cache_bytes: int) -> int:
    """Largest batch of `context`-token sequences (bf16 weights) in all of an A100 80GB's reported memory."""
    s = model_spec(model)
    return max_batch(gpu_spec("A100 80GB SXM").memory_bytes, s.weight_bytes(2), s.kv_bytes_per_token(cache_bytes),
                     context)


def _llama3_70b_gib(**_: object) -> float:
    """GiB of bf16 KV cache for one 131,072-token sequence of Llama-3-70B."""
    s = model_spec("llama-3-70b")
    return kv_cache_bytes(s.n_layers, s.n_kv_heads, s.head_dim, 131_072, 1, 2) / 2**30


def _cache_mib(kv_bytes_per_token: int, tokens: int, batch: int) -> float:
    """MiB of a cache holding `tokens` tokens for each of `batch` sequences, from the bytes of one token."""
    return kv_bytes_per_token * tokens * batch / 2**20


EXERCISES = {
    "4.1": Numeric(expected=_llama3_70b_gib, rel_tol=0.02, unit="GiB"),
    "4.2": Numeric(expected=lambda **_: _a100_batch("llama-2-7b", 4096, 2), rel_tol=0.001, unit="sequences"),
    "4.3": Numeric(expected=lambda **_: _a100_batch("llama-3-8b", 32_768, 1), rel_tol=0.001, unit="sequences"),
    "4.4": Numeric(expected=lambda **_: float(reserved_tokens(np.array([1000]), "paged", 4096, 16)[0] - 1000),
                   rel_tol=0.001, unit="slots"),
    "4.5": Numeric(expected=_cache_mib, rel_tol=0.01, unit="MiB"),
}
