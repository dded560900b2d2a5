"""Speculative decoding (chapter 7): tokens per verification, the speedup they buy, and a draft whose
acceptance rate is set, so the speedup-against-acceptance curve can be measured with random weights."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...plumbing.compat import cache_kwargs, get_cache
from ...plumbing.validate import non_negative, positive, positive_int
from ..formulas import check_speculation, expected_tokens_per_verification, speculative_speedup  # noqa: F401
from ..kv_cache import rewind_cache
from ..phases import prefill
from ..step_time import predict_step_time


def synthetic_draft(reference: list[int], start: int, k: int, acceptance_rate: float, vocab_size: int,
                    generator: torch.Generator) -> list[int]:
    """k proposals from a synthetic draft: the target's own greedy token with probability a, else a wrong one."""
    proposals = []
    for i in range(start, start + k):
        right = reference[i] if i < len(reference) else 0
        hit = torch.rand((), generator=generator).item() < acceptance_rate
        proposals.append(right if hit else (right + 1) % vocab_size)
    return proposals


@torch.no_grad()
def speculative_generate(model, input_ids: torch.Tensor, max_new_tokens: int, k: int,
                         acceptance_rate: float, reference: list[int],
                         seed: int = 0) -> tuple[list[int], int]:
    """Greedy speculative decoding with a synthetic draft; returns (new token ids, verification
    forwards).

    `reference` is the target's greedy output (what the synthetic draft guesses from). Each round
    feeds the last token and k drafts in one forward, keeps the drafts up to the first the target
    disagrees with, adds the target's own next token, and crops the cache to the tokens kept."""
    check_speculation(k, acceptance_rate)
    positive_int("max_new_tokens", max_new_tokens)
    generator = torch.Generator().manual_seed(seed)
    prompt_len, vocab = input_ids.shape[1], model.config.vocab_size
    token, cache = prefill(model, input_ids)
    new, verifications = [token.item()], 0
    while len(new) < max_new_tokens:
        drafts = synthetic_draft(reference, len(new), k, acceptance_rate, vocab, generator)
        ids = torch.tensor([[new[-1], *drafts]], device=input_ids.device)  # (1, k + 1)
        out = model(ids, use_cache=True, **cache_kwargs(model, cache))
        # the target's next token after each fed position
        target = out.logits[0].argmax(-1).tolist()
        accepted = next((i for i in range(k) if drafts[i] != target[i]), k)
        new += drafts[:accepted] + [target[accepted]]
        cache = get_cache(out)
        # the newest token is fed in the next round
        rewind_cache(cache, prompt_len + len(new) - 1)
        verifications += 1
    return new[:max_new_tokens], verifications


class ForwardCounter:
    """Counts forward calls of a model (a pre-hook), e.g. a target's verifications in `generate`."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.calls = 0
        self._handle = model.register_forward_pre_hook(self._count)

    def _count(self, *_: object) -> None:
        self.calls += 1

    def remove(self) -> None:
        """Stop counting."""
        self._handle.remove()


def forwards_of(model: torch.nn.Module, fn: Callable[[], object]) -> tuple[object, int]:
    """fn()'s result and how many forward calls of `model` it made."""
    counter = ForwardCounter(model)
    try:
        return fn(), counter.calls
    finally:
        counter.remove()


def generation_time(prefill_s: float, step_s: float, n_tokens: int, tokens_per_forward: float = 1.0) -> float:
    """Seconds for n_tokens: a prefill (the first token), then forwards of step_s yielding tokens_per_forward."""
    positive_int("n_tokens", n_tokens)
    return non_negative("prefill_s", prefill_s) + (n_tokens - 1) / positive(
        "tokens_per_forward", tokens_per_forward) * non_negative("step_s", step_s)


def predict_verification_time(spec, k: int, context: int, batch_size: int, calibration) -> float:
    """Predicted seconds of one verification: k + 1 tokens per row, logits kept at every position.

    The step model keeps the last position's logits only; a verification scores every draft, so the LM head
    runs at batch_size x (k + 1) rows instead of batch_size."""
    head_flops = 2 * spec.vocab_size * spec.d_model  # per row of the LM head
    rows, last = batch_size * (positive_int("k", k) + 1), batch_size
    rate = calibration.matmul_rate
    extra = head_flops * (rows / rate(rows, "lm_head") - last / rate(last, "lm_head"))
    return predict_step_time(spec, k + 1, context, batch_size, calibration) + extra
