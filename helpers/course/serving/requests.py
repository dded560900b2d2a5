"""Chapter 5, requests: what arrives at a server (when, prompt and output lengths), and what came back."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...plumbing.validate import in_range, positive, positive_int
from ..latency import TokenTimes


@dataclass(frozen=True)
class Request:
    """One request: when it arrives (s), its prompt length and how many tokens it will generate."""

    id: int
    arrival: float
    prompt_len: int
    output_len: int


@dataclass
class Served(TokenTimes):
    """What happened to one request: the time each of its output tokens appeared (s, on the run's clock).

    TTFT, TPOT, ITL and E2EL come from `TokenTimes`, measured from the request's arrival."""

    request: Request
    token_times: list[float] = field(default_factory=list)
    error: str = ""  # why the request failed ("" if it did not); a failed request is kept and counted

    @property
    def timestamps(self) -> list[float]:
        """Seconds from the request's arrival to each of its tokens."""
        return [t - self.request.arrival for t in self.token_times]

    @property
    def ok(self) -> bool:
        """True if the request finished without an error."""
        return not self.error


def _lengths(mean: int, range_ratio: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n integer lengths uniform in [mean (1 - r), mean (1 + r)], at least 1 (vLLM's random dataset)."""
    low, high = max(1, round(mean * (1 - range_ratio))), max(1, round(mean * (1 + range_ratio)))
    return rng.integers(low, high + 1, size=n)


def poisson_requests(n: int, rate: float, prompt_len: int = 256, output_len: int = 128,
                     range_ratio: float = 0.5, seed: int = 0) -> list[Request]:
    """n requests with exponential gaps at `rate` per second (inf: all at t=0); the first arrives at 0."""
    positive_int("n", n)
    positive_int("prompt_len", prompt_len)
    positive_int("output_len", output_len)
    positive("rate", rate)  # requests/s; math.inf sends all at once
    in_range("range_ratio", range_ratio, 0, 1, include_high=False)
    rng = np.random.default_rng(seed)
    gaps = np.zeros(n) if math.isinf(rate) else rng.exponential(1.0 / rate, size=n)
    arrivals = np.concatenate([[0.0], np.cumsum(gaps[:-1])])  # like vLLM: send, then sleep a gap
    prompts, outputs = _lengths(prompt_len, range_ratio, n, rng), _lengths(output_len, range_ratio, n, rng)
    rows = zip(arrivals, prompts, outputs, strict=True)
    return [Request(i, float(a), int(p), int(o)) for i, (a, p, o) in enumerate(rows)]


# One token each in GPT-2-style byte-level tokenizers (GPT-2's own and the lab's offline one), and only there.
PROMPT_WORDS = (" the", " of", " and", " to", " a", " in", " is", " it")
EXACT_TRIES = 20  # decode-and-re-encode rounds before giving up on an exact length


def as_tokenizer(tokenizer):
    """A loaded tokenizer as is; a path or Hub id loaded with AutoTokenizer; None stays None."""
    if tokenizer is None or not isinstance(tokenizer, str):
        return tokenizer
    from transformers import AutoTokenizer  # only when a path is given: the word prompts need no transformers

    return AutoTokenizer.from_pretrained(tokenizer)


_ID_POOLS: dict[int, tuple[object, np.ndarray]] = {}  # id(tokenizer) -> (tokenizer, ids worth drawing)


def _id_pool(tokenizer) -> np.ndarray:
    """Ids that decode to whole characters on their own (no special ids, no stray UTF-8 bytes), found once."""
    held = _ID_POOLS.get(id(tokenizer))
    if held is None or held[0] is not tokenizer:
        special = set(tokenizer.all_special_ids)
        texts = tokenizer.batch_decode([[i] for i in range(len(tokenizer))])
        pool = np.array([i for i, t in enumerate(texts) if i not in special and t and "\ufffd" not in t])
        held = _ID_POOLS[id(tokenizer)] = (tokenizer, pool)
    return held[1]


def _exact_prompt(prompt_len: int, tokenizer, rng: np.random.Generator) -> str:
    """Random token ids decoded to text, re-encoded and trimmed or topped up until the text is prompt_len tokens.

    Decoding ids and encoding the text again can merge or split tokens, so the length is checked on the text the
    server will see (vLLM's random dataset and AIPerf build prompts the same way)."""
    pool, ids = _id_pool(tokenizer), []
    for _ in range(EXACT_TRIES):
        ids = ids[:prompt_len] + rng.choice(pool, size=max(0, prompt_len - len(ids))).tolist()
        text = tokenizer.decode(ids)
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) == prompt_len:
            return text
    raise ValueError(f"could not build a prompt of exactly {prompt_len} tokens in {EXACT_TRIES} tries")


def prompt_text(prompt_len: int, rng: np.random.Generator, tokenizer=None) -> str:
    """A random prompt of `prompt_len` tokens: exactly, with the model's `tokenizer` (loaded, or a path).

    Without a tokenizer it is `prompt_len` words, one token each only in GPT-2-style tokenizers: another model's
    tokenizer may count two or three times as many, so the length is approximate there (read the server's count,
    `usage.prompt_tokens`). Exact means as the tokenizer encodes the text; a server may add a BOS token or a
    chat template. Random, as vLLM's random dataset is: two prompts share no first block of 16 tokens, so a
    server's prefix cache cannot skip part of a prefill and the benchmark measures prefill as asked."""
    positive_int("prompt_len", prompt_len)
    tokenizer = as_tokenizer(tokenizer)
    if tokenizer is not None:
        return _exact_prompt(prompt_len, tokenizer, rng)
    return "".join(rng.choice(PROMPT_WORDS, size=prompt_len))


def requests_from_table(table: pd.DataFrame) -> list[Request]:
    """Requests from a table with columns arrival, prompt_len, output_len (a hand-made trace)."""
    missing = {"arrival", "prompt_len", "output_len"} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks columns {sorted(missing)}")
    return [Request(i, float(r.arrival), int(r.prompt_len), int(r.output_len))
            for i, r in enumerate(table.itertuples(index=False))]
