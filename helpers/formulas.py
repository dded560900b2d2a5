"""Formulas: FLOPs, bytes moved, arithmetic intensity and roofline times, worked from shapes and specs."""

from __future__ import annotations

from .models import ModelSpec


def _positive(name: str, value: float) -> None:
    """Raise a ValueError naming `name` unless value > 0."""
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value!r}")


def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of an (m x k) @ (k x n) product: one multiply and one add per term, 2 m k n."""
    for name, value in (("m", m), ("k", k), ("n", n)):
        _positive(name, value)
    return 2 * m * k * n


def matmul_bytes(m: int, k: int, n: int, bytes_per_elem: int = 2) -> int:
    """Bytes an (m x k) @ (k x n) product must move at least: read both inputs, write the output."""
    _positive("bytes_per_elem", bytes_per_elem)
    return bytes_per_elem * (m * k + k * n + m * n)


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs per byte moved."""
    _positive("nbytes", nbytes)
    return flops / nbytes


def roofline_time(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> float:
    """Lower bound on time: the slower of doing the math at peak and moving the bytes at full bandwidth."""
    _positive("peak_flops", peak_flops)
    _positive("bandwidth", bandwidth)
    return max(flops / peak_flops, nbytes / bandwidth)


def matmul_params(spec: ModelSpec) -> int:
    """Parameters used in matrix products per token: all but the embedding lookups (the LM head counts)."""
    lookups = 0 if spec.tied_embeddings else spec.vocab_size * spec.d_model
    if spec.family == "gpt2":  # learned position embeddings are a lookup too
        lookups += spec.max_positions * spec.d_model
    return spec.n_params - lookups


def attention_flops(spec: ModelSpec, n_queries: int, n_context: int) -> int:
    """FLOPs of the score (Q K^T) and mix (A V) products: 4 x layers x heads x head_dim x queries x context."""
    _positive("n_queries", n_queries)
    _positive("n_context", n_context)
    return 4 * spec.n_layers * spec.n_heads * spec.head_dim * n_queries * n_context


def forward_flops(spec: ModelSpec, n_tokens: int, n_context: int | None = None) -> int:
    """FLOPs of a forward pass over `n_tokens` new tokens attending to `n_context` tokens (default n_tokens)."""
    n_context = n_tokens if n_context is None else n_context
    return 2 * matmul_params(spec) * n_tokens + attention_flops(spec, n_tokens, n_context)
