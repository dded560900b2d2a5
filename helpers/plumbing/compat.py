"""transformers compatibility: the KV cache's name changed from `past_key_values` (<= 5.2x) to `cache`."""

from __future__ import annotations

import inspect
from functools import cache

from transformers import PreTrainedModel
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
