"""Serving: a discrete-event simulator of an inference server, its schedulers and vLLM-style metrics.

Introduced in chapter 5 (batching and serving). The server runs in *steps*: each step is one forward pass
over the tokens the scheduler picked (whole prompts, prompt chunks, one token per decoding sequence), and
its cost comes from a step-cost model (fitted to this device's measurements, or a GPU's roofline). A new
token becomes visible at the end of the step that computed it. Three schedulers:

- ``static``: take up to ``max_batch`` waiting requests, prefill them together (padded to the longest
  prompt), decode until the longest output is done (finished rows still take part), then take the next batch.
- ``continuous``: every step, admit waiting requests into free slots (their whole prompt is computed in that
  step, beside one token for every running sequence), and retire finished ones at once.
- ``chunked``: continuous, but a step holds at most ``max_tokens_per_step`` tokens: decodes first, then
  prompt chunks fill what is left, so a long prompt never stalls the running sequences for a whole step.

Metrics follow vLLM's benchmark (``benchmarks/benchmark_serving.py``): TTFT = arrival to first token;
TPOT = (E2EL - TTFT) / (output tokens - 1) over requests with more than one token; ITL = every gap between
consecutive tokens of a request, pooled; E2EL = arrival to last token; throughput over the whole run, from
the first arrival to the last token.
"""

from __future__ import annotations

import json
import math
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .formulas import attention_flops, matmul_params
from .generation import percentiles
from .hardware import GPUSpec
from .kv_cache import kv_cache_bytes
from .models import ModelSpec

SCHEDULERS = ("static", "continuous", "chunked")
Work = Sequence[tuple[int, int]]  # one (new tokens this step, context length after the step) per sequence


@dataclass(frozen=True)
class Request:
    """One request: when it arrives (s), its prompt length and how many tokens it will generate."""

    id: int
    arrival: float
    prompt_len: int
    output_len: int


@dataclass
class Served:
    """What happened to one request: the time each of its output tokens appeared (s, simulation clock)."""

    request: Request
    token_times: list[float] = field(default_factory=list)

    @property
    def ttft(self) -> float:
        """Arrival to first token."""
        return self.token_times[0] - self.request.arrival

    @property
    def e2el(self) -> float:
        """Arrival to last token."""
        return self.token_times[-1] - self.request.arrival

    @property
    def tpot(self) -> float:
        """(E2EL - TTFT) / (tokens - 1); NaN for a single token."""
        n = len(self.token_times)
        return (self.e2el - self.ttft) / (n - 1) if n > 1 else math.nan

    @property
    def itl(self) -> list[float]:
        """Gaps between consecutive tokens."""
        return np.diff(self.token_times).tolist()


def rewind_cache(cache: object, length: int) -> None:
    """Drop the tokens appended to a transformers cache after its first `length` (so a step can be re-timed)."""
    extra = cache.get_seq_length() - length
    if extra < 0:
        raise ValueError(f"the cache holds {cache.get_seq_length()} tokens, fewer than length={length}")
    if extra:
        cache.crop(-extra)  # a negative argument removes that many tokens in every transformers version


# ---------------------------------------------------------------------------------------------- requests


def _check_positive_int(name: str, value: object) -> int:
    """Raise a ValueError naming `name` unless value is an int >= 1."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _lengths(mean: int, range_ratio: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n integer lengths uniform in [mean (1 - r), mean (1 + r)], at least 1 (vLLM's random dataset)."""
    low, high = max(1, round(mean * (1 - range_ratio))), max(1, round(mean * (1 + range_ratio)))
    return rng.integers(low, high + 1, size=n)


def poisson_requests(n: int, rate: float, prompt_len: int = 256, output_len: int = 128,
                     range_ratio: float = 0.5, seed: int = 0) -> list[Request]:
    """n requests with exponential gaps at `rate` per second (inf: all at t=0); the first arrives at 0."""
    _check_positive_int("n", n)
    _check_positive_int("prompt_len", prompt_len)
    _check_positive_int("output_len", output_len)
    if not rate > 0:
        raise ValueError(f"rate must be > 0 requests/s (math.inf for all at once), got {rate!r}")
    if not 0 <= range_ratio < 1:
        raise ValueError(f"range_ratio must be in [0, 1), got {range_ratio!r}")
    rng = np.random.default_rng(seed)
    gaps = np.zeros(n) if math.isinf(rate) else rng.exponential(1.0 / rate, size=n)
    arrivals = np.concatenate([[0.0], np.cumsum(gaps[:-1])])  # like vLLM: send, then sleep a gap
    prompts, outputs = _lengths(prompt_len, range_ratio, n, rng), _lengths(output_len, range_ratio, n, rng)
    rows = zip(arrivals, prompts, outputs, strict=True)
    return [Request(i, float(a), int(p), int(o)) for i, (a, p, o) in enumerate(rows)]


def requests_from_table(table: pd.DataFrame) -> list[Request]:
    """Requests from a table with columns arrival, prompt_len, output_len (a hand-made trace)."""
    missing = {"arrival", "prompt_len", "output_len"} - set(table.columns)
    if missing:
        raise ValueError(f"table lacks columns {sorted(missing)}")
    return [Request(i, float(r.arrival), int(r.prompt_len), int(r.output_len))
            for i, r in enumerate(table.itertuples(index=False))]


# ------------------------------------------------------------------------------------------- step costs


@dataclass(frozen=True)
class LinearStepCost:
    """Step seconds = fixed + per_token x new tokens + per_context_token x KV tokens read (fitted here)."""

    fixed_s: float
    per_token_s: float
    per_context_token_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("fixed_s", "per_token_s", "per_context_token_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")

    def __call__(self, work: Work) -> float:
        """Seconds for one step over `work`."""
        return (self.fixed_s + self.per_token_s * sum(new for new, _ in work)
                + self.per_context_token_s * sum(ctx for _, ctx in work))


@dataclass(frozen=True)
class RooflineStepCost:
    """Step seconds on a GPU's roofline: max(FLOPs / peak, (weights + KV read) / bandwidth) + overhead."""

    model: ModelSpec
    gpu: GPUSpec
    bytes_per_param: int = 2
    overhead_s: float = 0.0  # scheduling, launches, sampling: whatever the roofline leaves out
    tensor_parallel: int = 1  # GPUs sharing the step (communication is not modelled)

    def __call__(self, work: Work) -> float:
        """Seconds for one step over `work`."""
        new = sum(n for n, _ in work)
        flops = 2 * matmul_params(self.model) * new + sum(attention_flops(self.model, n, c) for n, c in work)
        kv_read = self.model.kv_bytes_per_token(self.bytes_per_param) * sum(c for _, c in work)
        nbytes = self.model.weight_bytes(self.bytes_per_param) + kv_read
        tp = self.tensor_parallel
        return max(flops / (tp * self.gpu.peak_flops), nbytes / (tp * self.gpu.bandwidth)) + self.overhead_s


def fit_linear_cost(tokens: Sequence[float], seconds: Sequence[float],
                    context_tokens: Sequence[float] | None = None) -> LinearStepCost:
    """Least-squares fit of step seconds to tokens (and KV tokens read), coefficients clipped at 0."""
    if len(tokens) != len(seconds) or len(tokens) < 2:
        raise ValueError(f"need >= 2 matching (tokens, seconds) points, got {len(tokens)} and {len(seconds)}")
    columns = [np.ones(len(tokens)), np.asarray(tokens, float)]
    if context_tokens is not None:
        if len(context_tokens) != len(tokens):
            raise ValueError("context_tokens must have one value per point")
        columns.append(np.asarray(context_tokens, float))
    coef, *_ = np.linalg.lstsq(np.column_stack(columns), np.asarray(seconds, float), rcond=None)
    coef = np.clip(coef, 0.0, None)
    return LinearStepCost(float(coef[0]), float(coef[1]), float(coef[2]) if len(coef) > 2 else 0.0)


def kv_capacity_tokens(model: ModelSpec, gpu: GPUSpec, memory_fraction: float = 0.9, bytes_per_elem: int = 2,
                       tensor_parallel: int = 1, bytes_per_param: int = 2) -> int:
    """KV tokens that fit beside the weights in `memory_fraction` of each GPU's memory (vLLM's default 0.9)."""
    if not 0 < memory_fraction <= 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}")
    per_gpu = tensor_parallel_memory(model, tensor_parallel, 1, 1, bytes_per_param, bytes_per_elem)
    free = gpu.memory_gb * 1e9 * memory_fraction - per_gpu["weights_bytes"]
    return max(0, int(free // per_gpu["kv_bytes"]))


def tensor_parallel_memory(model: ModelSpec, tp: int, seq_len: int, batch_size: int = 1,
                           bytes_per_param: int = 2, bytes_per_elem: int = 2) -> dict[str, float]:
    """Bytes per GPU under tensor parallelism: weights / tp; KV heads split, replicated when tp > KV heads."""
    _check_positive_int("tp", tp)
    if tp > model.n_heads or model.n_heads % tp:
        raise ValueError(f"tp must divide {model.name}'s {model.n_heads} attention heads, got {tp}")
    kv_heads = math.ceil(model.n_kv_heads / tp)  # tp > kv heads: each GPU keeps a copy of one head
    kv = kv_cache_bytes(model.n_layers, kv_heads, model.head_dim, seq_len, batch_size, bytes_per_elem)
    weights = model.weight_bytes(bytes_per_param) / tp
    return {"tp": tp, "weights_bytes": weights, "kv_heads_per_gpu": kv_heads, "kv_bytes": kv,
            "total_bytes": weights + kv}


# ---------------------------------------------------------------------------------------------- simulator


@dataclass
class _Seq:
    """A request inside the engine: prompt tokens computed so far, tokens generated so far."""

    served: Served
    prefilled: int = 0

    @property
    def req(self) -> Request:
        return self.served.request

    @property
    def generated(self) -> int:
        return len(self.served.token_times)

    @property
    def done(self) -> bool:
        return self.generated >= self.req.output_len

    @property
    def reserved(self) -> int:
        """KV tokens this sequence may need: its prompt plus all its output."""
        return self.req.prompt_len + self.req.output_len


@dataclass
class Simulation:
    """The result of one run: every request served, and one row per engine step."""

    scheduler: str
    served: list[Served]
    steps: pd.DataFrame  # start_s, seconds, tokens, sequences, prefill_tokens

    def requests_table(self) -> pd.DataFrame:
        """One row per request: arrival, lengths, TTFT, TPOT, E2EL (s)."""
        return pd.DataFrame([{"id": s.request.id, "arrival_s": s.request.arrival, "prompt_len": s.request.prompt_len,
                              "output_len": len(s.token_times), "ttft_s": s.ttft, "tpot_s": s.tpot,
                              "e2el_s": s.e2el} for s in self.served])


def _validate(requests: Sequence[Request], max_batch: int, kv_capacity: int | None,
              max_tokens_per_step: int | None) -> None:
    """Raise a ValueError for settings or requests the engine could never serve."""
    _check_positive_int("max_batch", max_batch)
    if kv_capacity is not None:
        _check_positive_int("kv_capacity", kv_capacity)
    if max_tokens_per_step is not None:
        _check_positive_int("max_tokens_per_step", max_tokens_per_step)
        if max_tokens_per_step < max_batch:
            raise ValueError(f"max_tokens_per_step ({max_tokens_per_step}) must be >= max_batch ({max_batch}) so "
                             "every running sequence can decode in a step")
    if not requests:
        raise ValueError("requests is empty")
    for r in requests:
        if r.arrival < 0 or not math.isfinite(r.arrival):
            raise ValueError(f"request {r.id}: arrival must be a finite time >= 0, got {r.arrival!r}")
        _check_positive_int(f"request {r.id}: prompt_len", r.prompt_len)
        _check_positive_int(f"request {r.id}: output_len", r.output_len)
        if kv_capacity is not None and r.prompt_len + r.output_len > kv_capacity:
            raise ValueError(f"request {r.id} needs {r.prompt_len + r.output_len} KV tokens, more than "
                             f"kv_capacity={kv_capacity}: it could never be served")
    if len({r.id for r in requests}) != len(requests):
        raise ValueError("request ids must be unique")


class _Engine:
    """Clock, waiting queue and step log shared by the schedulers."""

    def __init__(self, requests: Sequence[Request], cost: Callable[[Work], float]) -> None:
        self.pending = sorted(requests, key=lambda r: (r.arrival, r.id))  # not yet arrived
        self.waiting: list[Served] = []
        self.finished: list[Served] = []
        self.cost = cost
        self.now = 0.0
        self.log: list[dict[str, float]] = []

    def admit_arrivals(self) -> None:
        """Move requests that have arrived by now into the waiting queue."""
        while self.pending and self.pending[0].arrival <= self.now:
            self.waiting.append(Served(self.pending.pop(0)))

    def idle_until_next_arrival(self) -> None:
        """Jump the clock to the next arrival (nothing to run meanwhile)."""
        self.now = max(self.now, self.pending[0].arrival)
        self.admit_arrivals()

    def step(self, work: Work, prefill_tokens: int) -> float:
        """Advance the clock by one step over `work`; return the time its tokens appear."""
        seconds = float(self.cost(work))
        if not seconds > 0:
            raise ValueError(f"the step cost must be > 0 seconds, got {seconds!r} for {len(work)} sequences")
        self.log.append({"start_s": self.now, "seconds": seconds, "tokens": sum(n for n, _ in work),
                         "sequences": len(work), "prefill_tokens": prefill_tokens})
        self.now += seconds
        return self.now

    @property
    def busy(self) -> bool:
        return bool(self.pending or self.waiting)


def _run_static(engine: _Engine, max_batch: int, kv_capacity: int | None) -> None:
    """Static batching: a batch is formed, padded, and run to its longest output before the next one."""
    while engine.busy:
        if not engine.waiting:
            engine.idle_until_next_arrival()
        batch: list[Served] = []
        for s in engine.waiting[:max_batch]:  # FCFS while the padded batch's KV fits
            trial = batch + [s]
            longest = max(t.request.prompt_len for t in trial) + max(t.request.output_len for t in trial)
            if kv_capacity is not None and len(trial) * longest > kv_capacity:
                break
            batch = trial
        del engine.waiting[:len(batch)]
        prompt = max(s.request.prompt_len for s in batch)
        t = engine.step([(prompt, prompt)] * len(batch), prompt * len(batch))
        for s in batch:
            s.token_times.append(t)
        for k in range(1, max(s.request.output_len for s in batch)):
            t = engine.step([(1, prompt + k)] * len(batch), 0)  # finished rows are still computed (padding)
            for s in batch:
                if len(s.token_times) < s.request.output_len:
                    s.token_times.append(t)
        engine.finished.extend(batch)
        engine.admit_arrivals()


def _context_after(seq: _Seq, n: int) -> int:
    """KV tokens a sequence holds after a step that feeds it n tokens (a prompt chunk, or its last token)."""
    if seq.prefilled < seq.req.prompt_len:
        return seq.prefilled + n
    return seq.req.prompt_len + seq.generated


def _run_iteration_level(engine: _Engine, max_batch: int, kv_capacity: int | None,
                         max_tokens_per_step: int | None) -> None:
    """Continuous batching (whole prompts) or, with a token budget, chunked prefill."""
    running: list[_Seq] = []
    while engine.busy or running:
        if not running and not engine.waiting:
            engine.idle_until_next_arrival()
        reserved = sum(s.reserved for s in running)
        while engine.waiting and len(running) < max_batch:  # FCFS admission while a slot and KV are free
            seq = _Seq(engine.waiting[0])
            if kv_capacity is not None and reserved + seq.reserved > kv_capacity:
                break
            running.append(seq)
            reserved += seq.reserved
            engine.waiting.pop(0)
        budget = math.inf if max_tokens_per_step is None else max_tokens_per_step
        plan: list[tuple[_Seq, int]] = []
        for seq in running:  # decodes first: one token each
            if seq.prefilled == seq.req.prompt_len:
                plan.append((seq, 1))
                budget -= 1
        for seq in running:  # then prompts (or chunks of them) in admission order
            left = seq.req.prompt_len - seq.prefilled
            if left and budget > 0:
                chunk = int(min(left, budget))
                plan.append((seq, chunk))
                budget -= chunk
        work = [(n, _context_after(s, n)) for s, n in plan]
        prefill_tokens = sum(n for s, n in plan if s.prefilled < s.req.prompt_len)
        t = engine.step(work, prefill_tokens)
        for seq, n in plan:
            if seq.prefilled < seq.req.prompt_len:
                seq.prefilled += n
                if seq.prefilled == seq.req.prompt_len:  # the last chunk yields the first token
                    seq.served.token_times.append(t)
            else:
                seq.served.token_times.append(t)
        engine.finished.extend(s.served for s in running if s.done)
        running = [s for s in running if not s.done]
        engine.admit_arrivals()


def simulate(requests: Sequence[Request], cost: Callable[[Work], float], scheduler: str = "continuous",
             max_batch: int = 64, kv_capacity: int | None = None,
             max_tokens_per_step: int | None = None) -> Simulation:
    """Serve `requests` with one scheduler ('static', 'continuous', 'chunked'); step seconds come from `cost`.

    `kv_capacity` (tokens) bounds what the running sequences may hold (each reserves prompt + output);
    `max_tokens_per_step` is the chunked scheduler's token budget per step (default 512).
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
    if scheduler == "chunked" and max_tokens_per_step is None:
        max_tokens_per_step = max(512, max_batch)
    if scheduler != "chunked" and max_tokens_per_step is not None:
        raise ValueError("max_tokens_per_step only applies to the 'chunked' scheduler")
    _validate(requests, max_batch, kv_capacity, max_tokens_per_step)
    engine = _Engine(requests, cost)
    engine.admit_arrivals()
    if scheduler == "static":
        _run_static(engine, max_batch, kv_capacity)
    else:
        _run_iteration_level(engine, max_batch, kv_capacity, max_tokens_per_step)
    served = sorted(engine.finished, key=lambda s: s.request.id)
    return Simulation(scheduler, served, pd.DataFrame(engine.log))


# ------------------------------------------------------------------------------------------------ metrics


def serving_metrics(served: Sequence[Served], qs: Sequence[int] = (50, 90, 99)) -> dict[str, float]:
    """vLLM benchmark metrics: throughputs, and mean / percentiles of TTFT, TPOT, ITL, E2EL (seconds)."""
    done = [s for s in served if s.token_times]
    if not done:
        raise ValueError("no request produced a token")
    start = min(s.request.arrival for s in done)
    duration = max(s.token_times[-1] for s in done) - start
    out_tokens = sum(len(s.token_times) for s in done)
    in_tokens = sum(s.request.prompt_len for s in done)
    metrics: dict[str, float] = {
        "completed": len(done), "duration_s": duration,
        "request_throughput": len(done) / duration if duration > 0 else math.nan,
        "output_throughput": out_tokens / duration if duration > 0 else math.nan,
        "total_token_throughput": (in_tokens + out_tokens) / duration if duration > 0 else math.nan,
    }
    samples = {"ttft": [s.ttft for s in done], "tpot": [s.tpot for s in done if len(s.token_times) > 1],
               "itl": [g for s in done for g in s.itl], "e2el": [s.e2el for s in done]}
    for name, values in samples.items():
        metrics[f"{name}_mean_s"] = float(np.mean(values)) if values else math.nan
        metrics.update(percentiles(values, qs, prefix=name))
    return metrics


def check_conservation(requests: Sequence[Request], sim: Simulation) -> None:
    """Raise AssertionError unless every request was served exactly once with all its tokens, in order."""
    ids = [s.request.id for s in sim.served]
    assert sorted(ids) == sorted(r.id for r in requests), "served ids differ from the requests' ids"
    for s in sim.served:
        r = s.request
        assert len(s.token_times) == r.output_len, f"request {r.id}: {len(s.token_times)} of {r.output_len} tokens"
        assert s.token_times[0] > r.arrival, f"request {r.id}: a token before its arrival"
        assert all(np.diff(s.token_times) > 0), f"request {r.id}: tokens out of order"


# ------------------------------------------------------------------------------- a real server (optional)


def stream_completion(url: str, model: str, prompt: str, max_tokens: int, timeout: float = 600.0) -> list[float]:
    """Send one streaming /v1/completions request to an OpenAI-compatible server; seconds of each chunk."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                       "ignore_eos": True, "temperature": 0.0}).encode()
    request = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    times: list[float] = []
    with urllib.request.urlopen(request, timeout=timeout) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data:"):])
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                times.append(time.perf_counter() - start)
    return times


def benchmark_server(url: str, model: str, requests: Sequence[Request], timeout: float = 600.0) -> list[Served]:
    """Replay `requests` (arrival times, lengths) against a running server, one thread per request."""
    from concurrent.futures import ThreadPoolExecutor

    def send(r: Request) -> Served:
        time.sleep(max(0.0, start + r.arrival - time.perf_counter()))
        sent = time.perf_counter() - start
        times = stream_completion(url, model, "hi " * r.prompt_len, r.output_len, timeout)  # ~1 token per word
        return Served(Request(r.id, sent, r.prompt_len, r.output_len), [sent + t for t in times])

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=min(256, len(requests))) as pool:
        return list(pool.map(send, requests))
