"""Chapter 4, the cache itself: the FLOPs it saves, the bytes a real transformers cache object holds, and
cutting it back so a step can be timed again."""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache

from ...plumbing.compat import crop_cache
from ...plumbing.models import ModelSpec
from ...plumbing.validate import positive_int
from ..formulas import attention_flops, forward_flops


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
