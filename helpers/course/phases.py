"""Chapter 2, prefill vs decode: the two phases, a decode step timed at a fixed context, the static cache, and a
generation loop that times each token.

`prefill` and `decode_step` are taught (and shown, identical) in chapter 2; every later chapter and the
timed loop below call these very functions, so what is timed is what the learner read.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import PreTrainedModel, StaticCache
from transformers.generation.streamers import BaseStreamer

from ..plumbing.compat import cache_kwargs, get_cache, keep_window_past
from ..plumbing.device import synchronize
from ..plumbing.validate import positive, positive_int
from .kv_cache import rewind_cache
from .latency import TokenTimes, percentiles
from .roofline.op_counts import record_dispatch

Pick = Callable[[torch.Tensor], torch.Tensor]  # last-position logits (batch, vocab) -> next ids (batch, 1)
TokenCallback = Callable[[int, int, float], None]  # (index of the new token, its id, seconds since start)


def greedy(logits: torch.Tensor) -> torch.Tensor:
    """The most likely next token of each row: (batch, vocab) -> (batch, 1)."""
    return logits.argmax(dim=-1, keepdim=True)


def prefill(model, input_ids: torch.Tensor, pick: Pick = greedy, cache=None):
    """Run the whole prompt (B, N) once; return the first new token (B, 1) and the KV cache.

    `cache=None` lets the model start a DynamicCache; pass a StaticCache to fill a preallocated
    one."""
    out = model(input_ids, use_cache=True, logits_to_keep=1, **cache_kwargs(model, cache))  # logits: (B, 1, vocab)
    return pick(out.logits[:, -1]), get_cache(out)


def decode_step(model, token: torch.Tensor, cache, pick: Pick = greedy):
    """Feed one token per row (B, 1) and the cache; return the next token (B, 1) and the cache,
    one longer."""
    out = model(token, use_cache=True, **cache_kwargs(model, cache))  # logits: (B, 1, vocab)
    return pick(out.logits[:, -1]), get_cache(out)


def greedy_generate(model, input_ids: torch.Tensor, max_new_tokens: int, eos_token_id: int | None = None) -> list[int]:
    """Prefill once, then decode one token at a time; stop at max_new_tokens or at the end-of-text
    token."""
    token, cache = prefill(model, input_ids)
    new_ids = [token.item()]
    while len(new_ids) < max_new_tokens and new_ids[-1] != eos_token_id:
        token, cache = decode_step(model, token, cache)
        new_ids.append(token.item())
    return new_ids


def cache_copy_bytes(fn: Callable[[], object]) -> int:
    """Bytes one call of fn() moves through torch.cat, which is how DynamicCache appends a token (chapter 2)."""
    return sum(op.nbytes for op in record_dispatch(fn).ops if op.name == "aten.cat.default")  # inputs + output


def static_cache(model, max_cache_len: int, batch_size: int = 1) -> StaticCache:
    """A preallocated KV cache of `max_cache_len` tokens: each step writes its token in place, shapes never change.

    transformers 5.x sizes the batch at the first write and ignores `max_batch_size`; older versions need it."""
    return StaticCache(config=model.config, max_batch_size=batch_size, max_cache_len=max_cache_len)


def fixed_context_step(model, input_ids: torch.Tensor, n_new_tokens: int = 1) -> Callable[[], torch.Tensor]:
    """Prefill `input_ids` (B, N) once; return a call that runs one forward of `n_new_tokens` per row over those
    N cached tokens, then cuts the cache back to N, so every call times the same step. It returns the logits.

    n_new_tokens = 1 is a decode step at context N; k + 1 is a speculative verification."""
    token, cache = prefill(model, input_ids)
    keep_window_past(cache)  # a sliding layer's cache can then be cut back too
    context = input_ids.shape[1]
    new = token.repeat(1, positive_int("n_new_tokens", n_new_tokens))  # (B, n_new_tokens)

    def step() -> torch.Tensor:
        with torch.no_grad():
            out = model(new, use_cache=True, **cache_kwargs(model, cache))  # logits: (B, n_new_tokens, vocab)
            rewind_cache(get_cache(out), context)
        return out.logits

    return step


def sampler(temperature: float = 1.0, generator: torch.Generator | None = None) -> Pick:
    """A `pick` that samples from softmax(logits / temperature) instead of taking the argmax."""
    positive("temperature", temperature)

    def pick(logits: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(logits.float() / temperature, dim=-1)
        return torch.multinomial(probs, 1, generator=generator)

    return pick


@dataclass
class GenerationResult(TokenTimes):
    """New tokens of one request and the time each appeared, in seconds since the request started."""

    token_ids: list[int]
    timestamps: list[float]
    prompt_len: int
    stopped_on_eos: bool = False
    start: float = field(default=0.0, repr=False)  # time.perf_counter() at the start

    @property
    def decode_tokens_per_s(self) -> float:
        """Decode throughput of this request, 1 / TPOT."""
        return 1.0 / self.tpot if self.tpot > 0 else float("nan")

    def summary(self) -> dict[str, float]:
        """TTFT, TPOT, E2EL and the ITL median and p90/p99, in seconds, for a table row."""
        return {"prompt_len": self.prompt_len, "new_tokens": self.n_tokens, "ttft_s": self.ttft,
                "tpot_s": self.tpot, "e2el_s": self.e2el, **percentiles(self.itl, prefix="itl")}


def _check_prompt(input_ids: torch.Tensor) -> None:
    """A ValueError unless input_ids is one prompt, (1, prompt_len)."""
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must have shape (1, prompt_len), got {tuple(input_ids.shape)}")


@torch.no_grad()
def timed_generate(model: PreTrainedModel, input_ids: torch.Tensor, max_new_tokens: int, *,
                   eos_token_id: int | None = None, do_sample: bool = False, temperature: float = 1.0,
                   generator: torch.Generator | None = None, on_token: TokenCallback | None = None,
                   cache=None) -> GenerationResult:
    """`prefill`, then `decode_step` until `max_new_tokens` (or `eos_token_id`), timestamping every token.

    A token's timestamp is taken once its id is on the host (`.item()` waits for the device), which is when
    a server could stream it. `on_token(i, token_id, seconds)` runs after each timestamp (its own time
    lands in the next gap, as a server's send would). `cache` goes to `prefill` (e.g. a StaticCache)."""
    _check_prompt(input_ids)
    positive_int("max_new_tokens", max_new_tokens)
    pick = sampler(temperature, generator) if do_sample else greedy
    token_ids: list[int] = []
    timestamps: list[float] = []
    synchronize(input_ids.device)
    start = time.perf_counter()
    token, cache = prefill(model, input_ids, pick, cache)
    while True:
        token_ids.append(token.item())  # waits for the device: the token exists now
        timestamps.append(time.perf_counter() - start)
        if on_token is not None:
            on_token(len(token_ids) - 1, token_ids[-1], timestamps[-1])
        if token_ids[-1] == eos_token_id or len(token_ids) == max_new_tokens:
            break
        token, cache = decode_step(model, token, cache, pick)
    stopped = eos_token_id is not None and token_ids[-1] == eos_token_id
    return GenerationResult(token_ids, timestamps, input_ids.shape[1], stopped, start)


class TokenTimer(BaseStreamer):
    """A streamer for `model.generate` that timestamps every new token (its first put() is the prompt)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.token_ids: list[int] = []
        self.timestamps: list[float] = []
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        """Record the time the tokens in `value` reached the host (generate has copied them already)."""
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        now = time.perf_counter() - self.start
        for token_id in value.reshape(-1).tolist():
            self.token_ids.append(int(token_id))
            self.timestamps.append(now)

    def end(self) -> None:
        """Nothing is buffered, so nothing to flush."""


@torch.no_grad()
def timed_model_generate(model: PreTrainedModel, input_ids: torch.Tensor, max_new_tokens: int,
                         **generate_kwargs: object) -> GenerationResult:
    """Run `model.generate` on one prompt (greedy unless told otherwise) and time each token with a TokenTimer."""
    _check_prompt(input_ids)
    generate_kwargs.setdefault("do_sample", False)
    generate_kwargs.setdefault("attention_mask", torch.ones_like(input_ids))
    synchronize(input_ids.device)
    timer = TokenTimer()
    model.generate(input_ids, max_new_tokens=max_new_tokens, streamer=timer, **generate_kwargs)
    return GenerationResult(timer.token_ids, timer.timestamps, input_ids.shape[1], start=timer.start)
