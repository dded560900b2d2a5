"""Chapters 5 and 6, one time stamp per generated token, from the arrival times of a stream's chunks.

A chunk may carry several tokens (a server drains its queue in one write; a byte-level tokenizer holds text
back until a character is complete). Each token is stamped with the time its chunk reached the client: the
chunk's own count when it says (`logprobs`), else the tokens the chunks did not account for are shared out
over the chunks in proportion to the gap before each one (a longer wait bundles more tokens). So every
served request has exactly `usage.completion_tokens` stamps; TTFT, TPOT and E2EL are vLLM's; ITL has a 0
for each token that arrived in the same chunk as the one before it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def token_stamps(chunk_times: Sequence[float], chunk_tokens: Sequence[int | None], n_tokens: int) -> list[float]:
    """One time per token from the chunks' arrival times: exactly n_tokens stamps, each its chunk's time.

    Chunks with a known count get that many; the rest of the n_tokens go one to each chunk of unknown count
    (the first chunk carries the first token) and the remainder in proportion to the gap before each chunk."""
    if n_tokens < 1 or not chunk_times:
        raise ValueError(f"need at least one chunk and one token, got {len(chunk_times)} chunks, {n_tokens} tokens")
    counts = np.array([c if c is not None else 0 for c in chunk_tokens])
    unknown = np.array([c is None for c in chunk_tokens])
    left = n_tokens - counts.sum()
    if unknown.any():
        if left < unknown.sum():
            raise ValueError(f"the server reported {n_tokens} tokens but streamed {len(chunk_times)} token chunks")
        counts[unknown] += 1
        left -= unknown.sum()
        gaps = np.diff(np.concatenate([[chunk_times[0]], chunk_times])) * unknown
        if left and gaps.sum() <= 0:
            gaps = unknown.astype(float)
        share = left * gaps / gaps.sum() if left else np.zeros(len(counts))
        extra = np.floor(share).astype(int)
        order = np.argsort(-(share - extra), kind="stable")  # largest remainders get the last tokens
        extra[order[:left - extra.sum()]] += 1
        counts += extra
    elif left != 0:
        raise ValueError(f"the chunks carry {counts.sum()} tokens but the server reported {n_tokens}")
    return [t for t, c in zip(chunk_times, counts, strict=True) for _ in range(int(c))]
