"""KV cache: the formula for its size, and the bytes a real transformers cache object holds."""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache


def _positive_int(name: str, value: object) -> int:
    """Check that `value` is a positive int, naming the argument in the error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer (1 or more), got {value!r}")
    return value


def kv_cache_bytes(n_layers: int, n_kv_heads: int, head_dim: int, seq_len: int, batch_size: int = 1,
                   bytes_per_elem: int = 2) -> int:
    """Bytes of a KV cache: 2 (K and V) x bytes/elem x layers x KV heads x head_dim x tokens x batch."""
    args = dict(n_layers=n_layers, n_kv_heads=n_kv_heads, head_dim=head_dim, seq_len=seq_len,
                batch_size=batch_size, bytes_per_elem=bytes_per_elem)
    for name, value in args.items():
        _positive_int(name, value)
    return 2 * bytes_per_elem * n_layers * n_kv_heads * head_dim * seq_len * batch_size


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
