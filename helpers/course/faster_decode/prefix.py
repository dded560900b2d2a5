"""Chapter 7, prefix caching: copy a shared prefix's cache and prefill only the rest of the prompt."""

from __future__ import annotations

import copy

import torch

from ...plumbing.validate import in_range, positive_int
from ..phases import decode_step, prefill


def check_prefix(prefix_len: int, prompt_len: int) -> None:
    """A ValueError unless 1 <= prefix_len <= prompt_len - 1: the suffix must hold a token to prefill."""
    positive_int("prompt_len", prompt_len)
    positive_int("prefix_len", prefix_len)
    in_range("prefix_len", prefix_len, 1, prompt_len - 1)


@torch.no_grad()
def prefill_with_prefix(model, prefix_cache, suffix_ids: torch.Tensor) -> tuple[torch.Tensor, object]:
    """Copy a shared prefix's cache and prefill only the suffix: the first token (B, 1) and the cache."""
    return prefill(model, suffix_ids, cache=copy.deepcopy(prefix_cache))


def greedy_continue(model, token: torch.Tensor, cache, n_tokens: int) -> list[int]:
    """The first token and n_tokens - 1 greedy decode steps after it, as ids."""
    ids = [token.item()]
    with torch.no_grad():
        for _ in range(n_tokens - 1):
            token, cache = decode_step(model, token, cache)
            ids.append(token.item())
    return ids
