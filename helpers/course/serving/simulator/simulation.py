"""Chapter 5, batching and serving: a discrete-event simulator of an inference server and its schedulers.

The server runs in *steps*: each step is one forward pass over the tokens the scheduler picked (whole
prompts, prompt chunks, one token per decoding sequence), priced by a step cost: this device's calibrated
step model (`step_time.CalibratedStepCost`, chapter 8), a line fitted to this device's measurements, or a
GPU's roofline; any callable from the work [(new tokens, context after)] to seconds. A new token becomes
visible at the end of the step that computed it. Four schedulers:

- ``static``: take up to ``max_batch`` waiting requests, prefill them together (padded to the longest
  prompt), decode until the longest output is done (finished rows still take part), then take the next batch.
- ``continuous``: every step, admit waiting requests into free slots (their whole prompt is computed in that
  step, beside one token for every running sequence), and retire finished ones at once.
- ``chunked``: continuous, but a step holds at most ``max_tokens_per_step`` tokens: decodes first, then
  prompt chunks fill what is left, so a long prompt never stalls the running sequences for a whole step.
  This is transformers' default continuous batching order (`FIFOScheduler`).
- ``prefill_first``: the same token budget, ordered as transformers' `PrefillFirstScheduler`: a prompt split
  over steps first, then decodes, then new prompts, so while a long prompt's remainder fills the budget, every
  running sequence stalls; the prompt's first token comes sooner instead.

``simulate(..., prefilled=True)`` runs a decode-only instance (the decode side of `disaggregation.py`): each
request arrives holding prompt_len tokens of context (there: the prompt and its first token) and only decodes.

The iteration-level schedulers step as nano-vllm's engine does (`LLMEngine.step`, here `Engine.step`):
`schedule()` decides what runs (`scheduler.py`), `Engine.run()` prices the step with the step cost and moves
the clock, `postprocess()` hands out the new tokens and retires finished sequences. Every step leaves one
plain row; the `steps` table is built once at the end. `metrics` computes what vLLM's benchmark reports.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice, takewhile

import pandas as pd

from ....plumbing.validate import positive_int
from ...step_time import StepCost, Work
from ..requests import Request, Served
from .scheduler import Limits, Seq, postprocess, schedule

SCHEDULERS = ("static", "continuous", "chunked", "prefill_first")
BUDGETED = {"chunked": "fifo", "prefill_first": "prefill_first"}  # schedulers with a token budget: their order
STEP_COLUMNS = ["start_s", "seconds", "tokens", "sequences", "prefill_tokens"]
TRACE_COLUMNS = ["step", "start_s", "seconds", "id", "state", "tokens"]


@dataclass
class Simulation:
    """The result of one run: every request served, and one row per engine step."""

    scheduler: str
    served: list[Served]
    steps: pd.DataFrame  # STEP_COLUMNS: start_s, seconds, tokens, sequences, prefill_tokens
    trace: pd.DataFrame | None = None  # with simulate(..., trace=True): TRACE_COLUMNS, per step and request

    def requests_table(self) -> pd.DataFrame:
        """One row per request: arrival, lengths, TTFT, TPOT, E2EL (s)."""
        return pd.DataFrame([{"id": s.request.id, "arrival_s": s.request.arrival, "prompt_len": s.request.prompt_len,
                              "output_len": len(s.token_times), "ttft_s": s.ttft, "tpot_s": s.tpot,
                              "e2el_s": s.e2el} for s in self.served])


class Engine:
    """The clock, the queues (not yet arrived, waiting, running) and one plain row per step."""

    def __init__(self, requests: Sequence[Request], cost: StepCost, trace: bool = False,
                 prefilled: bool = False) -> None:
        arrivals = sorted(requests, key=lambda r: (r.arrival, r.id))
        self.pending = deque(Seq(r, r.prompt_len if prefilled else 0) for r in arrivals)
        self.waiting: deque[Seq] = deque()
        self.running: deque[Seq] = deque()
        self.finished: list[Seq] = []
        self.cost = cost
        self.now = 0.0
        self.rows: list[tuple] = []  # STEP_COLUMNS per step: the `steps` table is built once, at the end
        self.trace: list[tuple] | None = [] if trace else None  # TRACE_COLUMNS per request and step

    @property
    def busy(self) -> bool:
        return bool(self.pending or self.waiting or self.running)

    def admit_arrivals(self) -> None:
        """Move requests that have arrived by now into the waiting queue."""
        while self.pending and self.pending[0].request.arrival <= self.now:
            self.waiting.append(self.pending.popleft())

    def idle_until_next_arrival(self) -> None:
        """Jump the clock to the next arrival (nothing to run meanwhile)."""
        self.now = max(self.now, self.pending[0].request.arrival)
        self.admit_arrivals()

    def run(self, work: Work, prefill_tokens: int, plan: list[tuple[Seq, int]]) -> float:
        """Run one step over `work`, priced by the step cost: log it, move the clock; return when its tokens appear."""
        seconds = float(self.cost(work))
        if not seconds > 0:
            raise ValueError(f"the step cost must be > 0 seconds, got {seconds!r} for {len(work)} sequences")
        if self.trace is not None:
            self.trace.extend((len(self.rows), self.now, seconds, i, state, n) for i, state, n in self.states(plan))
        self.rows.append((self.now, seconds, sum(n for n, _ in work), len(work), prefill_tokens))
        self.now += seconds
        return self.now

    def states(self, plan: list[tuple[Seq, int]]) -> list[tuple[int, str, int]]:
        """(request id, state, tokens) this step for every arrived, unfinished request: the trace's rows."""
        rows = [(seq.request.id, "prefill" if seq.prompt_left else "padding" if seq.done else "decode", n)
                for seq, n in plan]  # padding: a finished row a static batch still computes
        planned = {seq for seq, _ in plan}
        rows += [(seq.request.id, "stalled", 0) for seq in self.running if seq not in planned]  # no budget left
        arrived = takewhile(lambda seq: seq.request.arrival <= self.now, self.pending)
        return rows + [(seq.request.id, "waiting", 0) for seq in (*self.waiting, *arrived)]

    def step(self, limits: Limits, policy: str = "fifo") -> None:
        """One iteration-level step, as a serving engine runs it: schedule, run (priced), postprocess."""
        plan = schedule(self.running, self.waiting, limits, policy)
        work = [(n, seq.context_after(n)) for seq, n in plan]  # (new tokens, KV tokens after) per sequence
        now = self.run(work, sum(n for seq, n in plan if seq.prompt_left), plan)
        self.finished += postprocess(plan, now, self.running)


def _static_batch(waiting: deque[Seq], limits: Limits) -> list[Seq]:
    """Take up to max_batch waiting sequences, first come first served, while the padded batch's KV fits."""
    batch: list[Seq] = []
    for seq in islice(waiting, limits.max_batch):
        trial = batch + [seq]
        longest = max(s.request.prompt_len for s in trial) + max(s.request.output_len for s in trial)
        if limits.kv_capacity is not None and len(trial) * longest > limits.kv_capacity:
            break
        batch = trial
    for _ in batch:
        waiting.popleft()
    return batch


def _run_static(engine: Engine, limits: Limits) -> None:
    """Static batching: a batch is formed, padded, and run to its longest output before the next one."""
    while engine.busy:
        if not engine.waiting:
            engine.idle_until_next_arrival()
        batch = _static_batch(engine.waiting, limits)
        engine.running.extend(batch)
        prompt = max(seq.request.prompt_len for seq in batch)
        t = engine.run([(prompt, prompt)] * len(batch), prompt * len(batch), [(seq, prompt) for seq in batch])
        for seq in batch:
            seq.prefilled = seq.request.prompt_len
            seq.served.token_times.append(t)
        for k in range(1, max(seq.request.output_len for seq in batch)):
            t = engine.run([(1, prompt + k)] * len(batch), 0, [(seq, 1) for seq in batch])  # finished rows: padding
            for seq in batch:
                if not seq.done:
                    seq.served.token_times.append(t)
        engine.running.clear()
        engine.finished += batch
        engine.admit_arrivals()


def _run_iteration_level(engine: Engine, limits: Limits, policy: str = "fifo") -> None:
    """Continuous batching (whole prompts) or, with a token budget, chunks in the policy's order: step by step."""
    while engine.busy:
        if not engine.running and not engine.waiting:
            engine.idle_until_next_arrival()
        engine.step(limits, policy)
        engine.admit_arrivals()


def _validate(requests: Sequence[Request], kv_capacity: int | None) -> None:
    """Raise a ValueError for requests the engine could never serve."""
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


def simulate(requests: Sequence[Request], cost: StepCost, scheduler: str = "continuous", max_batch: int = 64,
             kv_capacity: int | None = None, max_tokens_per_step: int | None = None, trace: bool = False,
             prefilled: bool = False) -> Simulation:
    """Serve `requests` with one scheduler ('static', 'continuous', 'chunked', 'prefill_first'); step seconds
    come from `cost`.

    'chunked' orders a step as transformers' `FIFOScheduler` (decodes, then prompts), 'prefill_first' as its
    `PrefillFirstScheduler` (a prompt begun in an earlier step, then decodes, then new prompts); both fill one
    token budget, `max_tokens_per_step` (default max(512, max_batch)). `kv_capacity` (tokens) bounds what the
    running sequences may hold (each reserves prompt + output); `trace=True` also records what every arrived,
    unfinished request does in every step (`Simulation.trace`). `prefilled=True` (not with 'static'): every
    request arrives with its context already cached, so it only decodes: each step feeds it one token, the
    context after it being prompt_len + tokens so far (a decode side passes prompt + first token as prompt_len).
    """
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
    if scheduler in BUDGETED and max_tokens_per_step is None:
        max_tokens_per_step = max(512, max_batch)
    if scheduler not in BUDGETED and max_tokens_per_step is not None:
        raise ValueError(f"max_tokens_per_step only applies to the {tuple(BUDGETED)} schedulers")
    if scheduler == "static" and prefilled:
        raise ValueError("prefilled=True needs an iteration-level scheduler, not 'static'")
    limits = Limits(max_batch, kv_capacity, max_tokens_per_step)
    _validate(requests, kv_capacity)
    engine = Engine(requests, cost, trace, prefilled)
    engine.admit_arrivals()
    if scheduler == "static":
        _run_static(engine, limits)
    else:
        _run_iteration_level(engine, limits, BUDGETED.get(scheduler, "fifo"))
    served = sorted((seq.served for seq in engine.finished), key=lambda s: s.request.id)
    steps_trace = None if engine.trace is None else pd.DataFrame(engine.trace, columns=TRACE_COLUMNS)
    return Simulation(scheduler, served, pd.DataFrame(engine.rows, columns=STEP_COLUMNS), steps_trace)
