"""Steps to time (chapter 7): a decode or verification forward at a fixed context, static-cache decoding
(eager or compiled), prefix caching, and the small Llama-style models the chapter runs."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace

import torch
from transformers import AutoModelForCausalLM, StaticCache

from ...plumbing.compat import cache_kwargs, get_cache
from ...plumbing.models import ModelSpec, build_config, model_spec
from ...plumbing.validate import in_range, non_negative, positive, positive_int
from ..kv_cache import rewind_cache
from ..phases import decode_step, prefill


def small_llama_spec(n_layers: int, d_model: int = 768, n_heads: int = 12, d_ff: int = 2048,
                     vocab_size: int = 32000, max_positions: int = 2048) -> ModelSpec:
    """A Llama-style architecture (nn.Linear layers, untied head) of any size, its parameters counted on meta."""
    for name, value in dict(n_layers=n_layers, d_model=d_model, n_heads=n_heads, d_ff=d_ff).items():
        positive_int(name, value)
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    spec = replace(model_spec("llama-2-7b"), name=f"llama-style {n_layers}x{d_model}", hub_id="",
                   n_layers=n_layers, d_model=d_model, n_heads=n_heads, n_kv_heads=n_heads,
                   head_dim=d_model // n_heads, vocab_size=vocab_size, d_ff=d_ff, max_positions=max_positions)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(build_config(spec))
    return replace(spec, n_params=sum(p.numel() for p in model.parameters()))


def decode_step_fn(model, input_ids: torch.Tensor, n_new_tokens: int = 1) -> Callable[[], torch.Tensor]:
    """A call that runs one forward of `n_new_tokens` per row after the prompt, then crops the cache back.

    n_new_tokens = 1 is a decode step; k + 1 is a speculative verification. The context stays fixed."""
    token, cache = prefill(model, input_ids)
    context = input_ids.shape[1]
    new = token.repeat(1, n_new_tokens)  # (B, n_new_tokens)

    def step():
        with torch.no_grad():
            out = model(new, use_cache=True, **cache_kwargs(model, cache))
            rewind_cache(get_cache(out), context)
        return out.logits

    return step


def check_prefix(prefix_len: int, prompt_len: int) -> None:
    """A ValueError unless 1 <= prefix_len <= prompt_len - 1: the suffix must hold a token to prefill."""
    positive_int("prompt_len", prompt_len)
    positive_int("prefix_len", prefix_len)
    in_range("prefix_len", prefix_len, 1, prompt_len - 1)


def prefix_ttft_speedup(full_prefill_s: float, suffix_prefill_s: float, copy_s: float = 0.0) -> float:
    """TTFT of a full prefill over that of copying the prefix's cache and prefilling the suffix only."""
    return positive("full_prefill_s", full_prefill_s) / (positive("suffix_prefill_s", suffix_prefill_s)
                                                          + non_negative("copy_s", copy_s))


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


def shifted_prediction(measured_base_s: float, predicted_base_s: float, predicted_variant_s: float) -> float:
    """The measured baseline plus the step model's predicted change: what the variant should take here."""
    return positive("measured_base_s", measured_base_s) + predicted_variant_s - predicted_base_s


def static_cache(model, batch_size: int, max_cache_len: int) -> StaticCache:
    """A preallocated KV cache of max_cache_len tokens: each step writes in place, shapes never change."""
    return StaticCache(config=model.config, max_batch_size=batch_size, max_cache_len=max_cache_len)


def static_greedy(forward: Callable, model, input_ids: torch.Tensor,
                  n_tokens: int) -> tuple[list[int], Callable]:
    """Greedy ids through a StaticCache of prompt + n_tokens slots, decode steps by `forward` (model.forward,
    or a compiled one).

    Also returns a call that re-runs the last decode step (the cache cut back first, so every call attends
    over the same cache). Each step attends over all the cache's slots, filled or not."""
    prompt_len = input_ids.shape[1]
    cache = static_cache(model, input_ids.shape[0], prompt_len + positive_int("n_tokens", n_tokens))
    token, cache = prefill(model, input_ids, cache=cache)
    ids = [token.item()]

    def step(token=token, position=prompt_len):
        with torch.no_grad():
            out = forward(token, use_cache=True, cache_position=torch.tensor([position], device=token.device),
                          **cache_kwargs(model, cache))
        return out.logits[:, -1].argmax(-1, keepdim=True)  # (B, 1)

    for i in range(n_tokens - 1):
        token = step(token, prompt_len + i)
        ids.append(token.item())
    last = prompt_len + n_tokens - 2

    def again():
        rewind_cache(cache, last)
        return step(token, last)

    return ids, again
