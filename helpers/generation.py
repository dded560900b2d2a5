"""Generation with a clock: one timestamp per new token, and the serving metrics vLLM's benchmark reports.

Introduced in chapter 2 (prefill vs decode). Definitions, all in seconds from the request's start:
- TTFT: start to the first new token (the prefill, plus picking its token).
- ITL: gap between consecutive new tokens (one per decode step).
- E2EL: start to the last new token, so ``ttft + sum(itl) == e2el``.
- TPOT: ``(e2el - ttft) / (n_tokens - 1)``, the mean decode step (undefined, NaN, for one token).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from transformers import PreTrainedModel
from transformers.generation.streamers import BaseStreamer

from .compat import cache_kwargs, get_cache
from .device import synchronize

TokenCallback = Callable[[int, int, float], None]  # (index of the new token, its id, seconds since start)


@dataclass
class GenerationResult:
    """New tokens of one request and the time each appeared, in seconds since the request started."""

    token_ids: list[int]
    timestamps: list[float]
    prompt_len: int
    stopped_on_eos: bool = False
    start: float = field(default=0.0, repr=False)  # time.perf_counter() at the start

    @property
    def n_tokens(self) -> int:
        """Number of new tokens."""
        return len(self.token_ids)

    @property
    def ttft(self) -> float:
        """Time to first token."""
        return self.timestamps[0]

    @property
    def e2el(self) -> float:
        """End-to-end latency: start to the last token."""
        return self.timestamps[-1]

    @property
    def itl(self) -> list[float]:
        """Inter-token latencies: one gap per token after the first."""
        return [b - a for a, b in zip(self.timestamps[:-1], self.timestamps[1:], strict=True)]

    @property
    def tpot(self) -> float:
        """Time per output token after the first, (e2el - ttft) / (n - 1); NaN for a single token."""
        if self.n_tokens < 2:
            return math.nan
        return (self.e2el - self.ttft) / (self.n_tokens - 1)

    @property
    def decode_tokens_per_s(self) -> float:
        """Decode throughput of this request, 1 / TPOT."""
        return 1.0 / self.tpot if self.tpot > 0 else math.nan

    def summary(self) -> dict[str, float]:
        """TTFT, TPOT, E2EL and the ITL median and p90/p99, in seconds, for a table row."""
        itl = self.itl
        return {"prompt_len": self.prompt_len, "new_tokens": self.n_tokens, "ttft_s": self.ttft,
                "tpot_s": self.tpot, "e2el_s": self.e2el, **percentiles(itl, prefix="itl")}


def percentiles(values: Sequence[float], qs: Sequence[int] = (50, 90, 99), prefix: str = "") -> dict[str, float]:
    """The qs-th percentiles of `values` (NaN when empty), keyed like 'itl_p50_s'."""
    name = f"{prefix}_" if prefix else ""
    if len(values) == 0:
        return {f"{name}p{q}_s": math.nan for q in qs}
    return {f"{name}p{q}_s": float(np.percentile(values, q)) for q in qs}


def _pick(logits: torch.Tensor, do_sample: bool, temperature: float,
          generator: torch.Generator | None) -> torch.Tensor:
    """Next token ids (batch, 1) from last-position logits (batch, vocab): argmax, or a sample."""
    if not do_sample:
        return logits.argmax(dim=-1, keepdim=True)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)


@torch.no_grad()
def timed_generate(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    *,
    eos_token_id: int | None = None,
    do_sample: bool = False,
    temperature: float = 1.0,
    generator: torch.Generator | None = None,
    on_token: TokenCallback | None = None,
) -> GenerationResult:
    """Generate up to `max_new_tokens` for one prompt (1, N), greedy by default, timing every token.

    A token's timestamp is taken once its id is on the host (`.item()` waits for the device), which is when
    a server could stream it. `on_token(i, token_id, seconds)` runs after each timestamp (its own time
    lands in the next gap, as a server's send would). Stops early at `eos_token_id` if one is given.
    """
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must have shape (1, prompt_len), got {tuple(input_ids.shape)}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be a positive integer, got {max_new_tokens!r}")
    if do_sample and temperature <= 0:
        raise ValueError(f"temperature must be > 0 when sampling, got {temperature}")
    device = input_ids.device
    token_ids: list[int] = []
    timestamps: list[float] = []
    synchronize(device)
    start = time.perf_counter()
    out = model(input_ids, use_cache=True, logits_to_keep=1)  # prefill: the whole prompt at once
    cache = get_cache(out)
    token = _pick(out.logits[:, -1], do_sample, temperature, generator)  # (1, 1)
    stopped = False
    while True:
        token_id = token.item()  # waits for the device: the token exists now
        timestamps.append(time.perf_counter() - start)
        token_ids.append(token_id)
        if on_token is not None:
            on_token(len(token_ids) - 1, token_id, timestamps[-1])
        if eos_token_id is not None and token_id == eos_token_id:
            stopped = True
            break
        if len(token_ids) == max_new_tokens:
            break
        out = model(token, use_cache=True, **cache_kwargs(model, cache))  # decode: one token, the cache
        cache = get_cache(out)
        token = _pick(out.logits[:, -1], do_sample, temperature, generator)
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
    if input_ids.dim() != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"input_ids must have shape (1, prompt_len), got {tuple(input_ids.shape)}")
    generate_kwargs.setdefault("do_sample", False)
    generate_kwargs.setdefault("attention_mask", torch.ones_like(input_ids))
    synchronize(input_ids.device)
    timer = TokenTimer()
    model.generate(input_ids, max_new_tokens=max_new_tokens, streamer=timer, **generate_kwargs)
    return GenerationResult(timer.token_ids, timer.timestamps, input_ids.shape[1], start=timer.start)


@dataclass(frozen=True)
class Allocations:
    """Bytes of PyTorch CPU tensors a call allocated: still `held` after it, and its `peak` above the start."""

    held: int
    peak: int


def cpu_allocations(fn: Callable[[], object]) -> tuple[object, Allocations]:
    """Run `fn()` under torch.profiler(profile_memory=True); return its result and the CPU bytes it allocated.

    Exact for tensors PyTorch allocates, unlike the process's resident memory, which reuses freed pages.
    """
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    changes = sorted((e.time_range.start, e.self_cpu_memory_usage) for e in prof.events() if e.self_cpu_memory_usage)
    running = np.cumsum([0] + [change for _, change in changes])
    return result, Allocations(held=int(running[-1]), peak=int(running.max()))
