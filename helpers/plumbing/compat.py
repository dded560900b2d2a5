"""transformers compatibility: the KV cache's name changed from `past_key_values` (<= 5.2x) to `cache`; the
paged cache's block became a page and its tensors one buffer; static caches learnt to crop (5.17 -> 5.24)."""

from __future__ import annotations

import dataclasses
import inspect
from functools import cache

from transformers import ContinuousBatchingConfig, PreTrainedModel
from transformers.cache_utils import Cache


@cache
def _cache_keyword(forward_class: type) -> str:
    """The keyword a model class's forward() takes the cache by: 'cache' (new) or 'past_key_values' (old)."""
    params = inspect.signature(forward_class.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_kwargs(model: PreTrainedModel, cache: Cache | None) -> dict[str, object]:
    """Keyword arguments that pass `cache` into `model(...)`, e.g. `model(ids, **cache_kwargs(model, cache))`."""
    return {_cache_keyword(type(model)): cache}


def get_cache(outputs: object) -> Cache:
    """The KV cache a forward pass returned, under whichever name this transformers version uses."""
    for name in ("cache", "past_key_values"):
        cache = getattr(outputs, name, None)
        if cache is not None:
            return cache
    raise ValueError("outputs holds no KV cache: call the model with use_cache=True")


def keep_window_past(cache: Cache) -> None:
    """Let a cache's sliding-window layers be cropped back after a step: transformers 5.24's layers drop the
    tokens that leave the window unless told to keep them until the next crop (a no-op where there is none)."""
    for layer in getattr(cache, "layers", []):
        if hasattr(layer, "activate_past_recording"):
            layer.activate_past_recording()


def crop_cache(cache: Cache, n_tokens: int) -> None:
    """Remove the last `n_tokens` tokens from a transformers cache."""
    layers = getattr(cache, "layers", [])
    if all(hasattr(layer, "crop") for layer in layers):
        cache.crop(-n_tokens)  # a negative argument removes that many tokens
        return
    for layer in layers:  # 5.17's StaticLayer has no crop(): wind its length back, the next update overwrites
        if hasattr(layer, "crop"):
            layer.crop(-n_tokens)
        else:
            layer.cumulative_length.sub_(n_tokens)


MAX_BATCH_TOKENS = 8192  # 5.24's default tokens per step; 5.17, given num_blocks, sizes it to the memory (M x M mask)


def paged_config(block_size: int, num_blocks: int, **options: object):
    """A ContinuousBatchingConfig of `num_blocks` blocks of `block_size` tokens (5.17 names page_size block_size)."""
    names = {field.name for field in dataclasses.fields(ContinuousBatchingConfig)}
    size = "page_size" if "page_size" in names else "block_size"
    options.setdefault("max_batch_tokens", MAX_BATCH_TOKENS)
    return ContinuousBatchingConfig(**{size: block_size}, num_blocks=num_blocks, **options)


def paged_cache_bytes(cache: object) -> tuple[int, int]:
    """A PagedAttentionCache's bytes in all and per allocation unit (5.24: one buffer in sectors; 5.17: blocks)."""
    if hasattr(cache, "cache_tensor"):
        return cache.cache_tensor.nbytes, int(cache.bytes_per_sector)
    nbytes = sum(t.nbytes for t in cache.key_cache + cache.value_cache)  # each: (num_blocks + 2) * block_size rows
    return nbytes, nbytes // (cache.num_blocks + 2)
