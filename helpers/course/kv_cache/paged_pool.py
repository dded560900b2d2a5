"""Chapter 4, contiguous vs paged: how a pool of KV slots fills with a stream of requests under each scheme."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...plumbing.validate import positive_int


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
