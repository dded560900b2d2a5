"""Chapter 6, the in-process engine: `model.generate_batch` (continuous batching over a paged KV cache), run
once per cache setting, with the cache the engine really allocated read back from it."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from ...plumbing.validate import positive_int


@dataclass(frozen=True)
class PagedRun:
    """One generate_batch run: the blocks asked for, what the engine allocated, and how long the run took."""

    block_size: int  # tokens per block (the engine's page size)
    blocks_asked: int
    blocks: int  # whole-model blocks the engine's cache holds
    cache_bytes: int  # bytes of the engine's one cache tensor (its two unused "trash" sectors included)
    sector_bytes: int  # the engine's allocation unit
    seconds: float
    tokens: list[list[int]]  # generated tokens per request, in the order of the prompts


def run_paged(model, prompts: Sequence[Sequence[int]], generation_config, block_size: int, num_blocks: int) -> PagedRun:
    """Generate with a paged cache of `num_blocks` blocks of `block_size` tokens and read the cache back."""
    from transformers import ContinuousBatchingConfig

    positive_int("block_size", block_size)
    positive_int("num_blocks", num_blocks)
    config = ContinuousBatchingConfig(page_size=block_size, num_blocks=num_blocks)
    start = time.perf_counter()
    outputs = model.generate_batch([list(p) for p in prompts], generation_config=generation_config,
                                   continuous_batching_config=config, persistent_manager=True)
    seconds = time.perf_counter() - start
    try:
        cache = model._cached_continuous_batching_manager.batch_processor.cache  # the engine's PagedAttentionCache
        tensor = cache.cache_tensor
        return PagedRun(block_size, num_blocks, int(cache.num_blocks), tensor.numel() * tensor.element_size(),
                        int(cache.bytes_per_sector), seconds, [out.generated_tokens for out in outputs.values()])
    finally:
        model.destroy_cached_continuous_batching_manager()
