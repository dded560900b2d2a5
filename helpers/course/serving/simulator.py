"""Chapter 5, batching and serving: a discrete-event simulator of an inference server and its schedulers.

 The server runs in *steps*: each step is one forward pass
over the tokens the scheduler picked (whole prompts, prompt chunks, one token per decoding sequence), and
its cost comes from a step-cost model: this device's calibrated step model (`step_time.CalibratedStepCost`,
chapter 8), a line fitted to this device's measurements, or a GPU's roofline; any callable from the work
[(new tokens, context after)] to seconds. A new token becomes visible at the end of the step that computed
it. Three schedulers:

- ``static``: take up to ``max_batch`` waiting requests, prefill them together (padded to the longest
  prompt), decode until the longest output is done (finished rows still take part), then take the next batch.
- ``continuous``: every step, admit waiting requests into free slots (their whole prompt is computed in that
  step, beside one token for every running sequence), and retire finished ones at once.
- ``chunked``: continuous, but a step holds at most ``max_tokens_per_step`` tokens: decodes first, then
  prompt chunks fill what is left, so a long prompt never stalls the running sequences for a whole step.

The per-step decision of the two iteration-level schedulers is `schedule()`, on one screen; `metrics`
computes what vLLM's benchmark reports from the result.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from ...plumbing.validate import positive_int
from ..step_time import Work
from .requests import Request, Served

SCHEDULERS = ("static", "continuous", "chunked")


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
    trace: pd.DataFrame | None = None  # with simulate(..., trace=True): step, id, state, tokens per request

    def requests_table(self) -> pd.DataFrame:
        """One row per request: arrival, lengths, TTFT, TPOT, E2EL (s)."""
        return pd.DataFrame([{"id": s.request.id, "arrival_s": s.request.arrival, "prompt_len": s.request.prompt_len,
                              "output_len": len(s.token_times), "ttft_s": s.ttft, "tpot_s": s.tpot,
                              "e2el_s": s.e2el} for s in self.served])


def _validate(requests: Sequence[Request], max_batch: int, kv_capacity: int | None,
              max_tokens_per_step: int | None) -> None:
    """Raise a ValueError for settings or requests the engine could never serve."""
    positive_int("max_batch", max_batch)
    if kv_capacity is not None:
        positive_int("kv_capacity", kv_capacity)
    if max_tokens_per_step is not None:
        positive_int("max_tokens_per_step", max_tokens_per_step)
        if max_tokens_per_step < max_batch:
            raise ValueError(f"max_tokens_per_step ({max_tokens_per_step}) must be >= max_batch ({max_batch}) so "
                             "every running sequence can decode in a step")
    if not requests:
        raise ValueError("requests is empty")
    for r in requests:
        if r.arrival < 0 or not math.isfinite(r.arrival):
            raise ValueError(f"request {r.id}: arrival must be a finite time >= 0, got {r.arrival!r}")
        positive_int(f"request {r.id}: prompt_len", r.prompt_len)
        positive_int(f"request {r.id}: output_len", r.output_len)
        if kv_capacity is not None and r.prompt_len + r.output_len > kv_capacity:
            raise ValueError(f"request {r.id} needs {r.prompt_len + r.output_len} KV tokens, more than "
                             f"kv_capacity={kv_capacity}: it could never be served")
    if len({r.id for r in requests}) != len(requests):
        raise ValueError("request ids must be unique")


class _Engine:
    """Clock, waiting queue and step log shared by the schedulers."""

    def __init__(self, requests: Sequence[Request], cost: Callable[[Work], float], trace: bool = False) -> None:
        self.pending = sorted(requests, key=lambda r: (r.arrival, r.id))  # not yet arrived
        self.waiting: list[Served] = []
        self.finished: list[Served] = []
        self.cost = cost
        self.now = 0.0
        self.log: list[dict[str, float]] = []
        self.trace: list[dict] | None = [] if trace else None

    def admit_arrivals(self) -> None:
        """Move requests that have arrived by now into the waiting queue."""
        while self.pending and self.pending[0].arrival <= self.now:
            self.waiting.append(Served(self.pending.pop(0)))

    def idle_until_next_arrival(self) -> None:
        """Jump the clock to the next arrival (nothing to run meanwhile)."""
        self.now = max(self.now, self.pending[0].arrival)
        self.admit_arrivals()

    def step(self, work: Work, prefill_tokens: int, states: Sequence[tuple[int, str, int]] = ()) -> float:
        """Advance the clock by one step over `work`; return the time its tokens appear.

        `states` (request id, 'prefill' / 'decode' / 'padding' / 'stalled', tokens) feeds the optional trace;
        requests that have arrived and are not in `states` are traced as 'waiting'."""
        seconds = float(self.cost(work))
        if not seconds > 0:
            raise ValueError(f"the step cost must be > 0 seconds, got {seconds!r} for {len(work)} sequences")
        if self.trace is not None:
            queued = [s.request for s in self.waiting] + [r for r in self.pending if r.arrival <= self.now]
            rows = list(states) + [(r.id, "waiting", 0) for r in queued]
            self.trace.extend({"step": len(self.log), "start_s": self.now, "seconds": seconds, "id": i,
                               "state": state, "tokens": n} for i, state, n in rows)
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
        t = engine.step([(prompt, prompt)] * len(batch), prompt * len(batch),
                        [(s.request.id, "prefill", prompt) for s in batch])
        for s in batch:
            s.token_times.append(t)
        for k in range(1, max(s.request.output_len for s in batch)):
            states = [(s.request.id, "decode" if len(s.token_times) < s.request.output_len else "padding", 1)
                      for s in batch]
            t = engine.step([(1, prompt + k)] * len(batch), 0, states)  # finished rows are still computed (padding)
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


def schedule(running: list[_Seq], waiting: list[Served], max_batch: int, kv_capacity: int | None,
             max_tokens_per_step: int | None) -> list[tuple[_Seq, int]]:
    """One step's decision: admit, then plan (sequence, tokens) pairs, decodes first, then prompt chunks."""
    reserved = sum(s.reserved for s in running)
    while waiting and len(running) < max_batch:  # FCFS admission while a slot and KV are free
        seq = _Seq(waiting[0])
        if kv_capacity is not None and reserved + seq.reserved > kv_capacity:
            break
        running.append(seq)
        reserved += seq.reserved
        waiting.pop(0)
    budget = math.inf if max_tokens_per_step is None else max_tokens_per_step
    plan = [(seq, 1) for seq in running if seq.prefilled == seq.req.prompt_len]  # decodes: one token each
    budget -= len(plan)
    for seq in running:  # then prompts (or chunks of them) in admission order
        left = seq.req.prompt_len - seq.prefilled
        if left and budget > 0:
            plan.append((seq, int(min(left, budget))))
            budget -= plan[-1][1]
    return plan


def _run_iteration_level(engine: _Engine, max_batch: int, kv_capacity: int | None,
                         max_tokens_per_step: int | None) -> None:
    """Continuous batching (whole prompts) or, with a token budget, chunked prefill: schedule, step, retire."""
    running: list[_Seq] = []
    while engine.busy or running:
        if not running and not engine.waiting:
            engine.idle_until_next_arrival()
        plan = schedule(running, engine.waiting, max_batch, kv_capacity, max_tokens_per_step)
        work = [(n, _context_after(s, n)) for s, n in plan]
        planned = {id(s) for s, _ in plan}
        states = [(s.req.id, "prefill" if s.prefilled < s.req.prompt_len else "decode", n) for s, n in plan]
        states += [(s.req.id, "stalled", 0) for s in running if id(s) not in planned]  # admitted, no budget left
        t = engine.step(work, sum(n for s, n in plan if s.prefilled < s.req.prompt_len), states)
        for seq, n in plan:
            if seq.prefilled < seq.req.prompt_len:
                seq.prefilled += n
                if seq.prefilled == seq.req.prompt_len:  # the last chunk yields the first token
                    seq.served.token_times.append(t)
            else:
                seq.served.token_times.append(t)
        engine.finished.extend(s.served for s in running if s.done)
        running[:] = [s for s in running if not s.done]
        engine.admit_arrivals()


def simulate(requests: Sequence[Request], cost: Callable[[Work], float], scheduler: str = "continuous",
             max_batch: int = 64, kv_capacity: int | None = None,
             max_tokens_per_step: int | None = None, trace: bool = False) -> Simulation:
    """Serve `requests` with one scheduler ('static', 'continuous', 'chunked'); step seconds come from `cost`.

    `kv_capacity` (tokens) bounds what the running sequences may hold (each reserves prompt + output);
    `max_tokens_per_step` is the chunked scheduler's token budget per step (default 512); `trace=True` also
    records what every arrived, unfinished request does in every step (`Simulation.trace`).
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
    if scheduler == "chunked" and max_tokens_per_step is None:
        max_tokens_per_step = max(512, max_batch)
    if scheduler != "chunked" and max_tokens_per_step is not None:
        raise ValueError("max_tokens_per_step only applies to the 'chunked' scheduler")
    _validate(requests, max_batch, kv_capacity, max_tokens_per_step)
    engine = _Engine(requests, cost, trace)
    engine.admit_arrivals()
    if scheduler == "static":
        _run_static(engine, max_batch, kv_capacity)
    else:
        _run_iteration_level(engine, max_batch, kv_capacity, max_tokens_per_step)
    served = sorted(engine.finished, key=lambda s: s.request.id)
    steps_trace = None if engine.trace is None else pd.DataFrame(engine.trace, columns=TRACE_COLUMNS)
    return Simulation(scheduler, served, pd.DataFrame(engine.log), steps_trace)


TRACE_COLUMNS = ["step", "start_s", "seconds", "id", "state", "tokens"]
TRACE_COLORS = {"prefill": "tab:orange", "decode": "tab:blue", "padding": "lightgray", "stalled": "khaki",
                "waiting": "white"}


def plot_trace(sim: Simulation, ax, names: Sequence[str] | None = None) -> None:
    """Draw a traced simulation: one row per request, one box per step, coloured by what the request did."""
    if sim.trace is None:
        raise ValueError("this simulation has no trace: run simulate(..., trace=True)")
    ids = sorted(sim.trace["id"].unique())
    label = dict(zip(ids, names or [str(i) for i in ids], strict=True))
    for row in sim.trace.itertuples(index=False):
        y = ids.index(row.id)
        ax.broken_barh([(row.start_s, row.seconds)], (y - 0.4, 0.8), facecolors=TRACE_COLORS[row.state],
                       edgecolor="black", lw=0.6, hatch="//" if row.state == "waiting" else None)
        if row.tokens:
            ax.text(row.start_s + row.seconds / 2, y, f"{row.state} {row.tokens}", ha="center", va="center", fontsize=7)
    for s in sim.served:
        y = ids.index(s.request.id)
        ax.plot(s.token_times, [y + 0.45] * len(s.token_times), "kv", ms=5)  # a token appears
        ax.plot([s.request.arrival], [y], "k>", ms=7)  # the request arrives
    ax.set_yticks(range(len(ids)), [label[i] for i in ids])
    ax.set_xlabel("time (s)")
    ax.set_title(sim.scheduler, fontsize=9)
