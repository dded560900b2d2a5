"""Chapter 5, the scheduler of the iteration-level simulator: what runs in each step, and what a step leaves.

As in nano-vllm's `Scheduler`: `schedule()` admits waiting sequences and plans the step (a decode loop,
then a prompt loop), `postprocess()` hands out the step's tokens and retires finished sequences. The
simulator (`simulation.py`) runs the model's part in between: it prices the step with a step cost.

Two orders share one token budget, as transformers' continuous batching schedulers
(`transformers/generation/continuous_batching/scheduler.py`) order their candidates:

- ``fifo`` (`FIFOScheduler`, transformers' default): decodes first (one token each), then prompts in
  admission order (a prompt split over steps, then fresh ones), each taking min(tokens left, budget left).
- ``prefill_first`` (`PrefillFirstScheduler`): a prompt already split over steps first, then decodes, then
  fresh prompts: a split prompt with at least a budget's worth left takes the whole step, and every decode stalls.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from ....plumbing.validate import one_of, positive_int
from ..requests import Request, Served

POLICIES = ("fifo", "prefill_first")  # transformers' FIFOScheduler and PrefillFirstScheduler


@dataclass(eq=False, slots=True)
class Seq:
    """A request inside the engine: prompt tokens computed so far, and the times of its tokens (`served`)."""

    request: Request
    prefilled: int = 0
    served: Served = field(init=False)

    def __post_init__(self) -> None:
        self.served = Served(self.request)

    @property
    def prompt_left(self) -> int:
        return self.request.prompt_len - self.prefilled

    @property
    def done(self) -> bool:
        return len(self.served.token_times) >= self.request.output_len

    @property
    def reserved(self) -> int:
        """KV tokens this sequence may need: its prompt plus all its output."""
        return self.request.prompt_len + self.request.output_len

    def context_after(self, n: int) -> int:
        """KV tokens it holds after a step that feeds it n tokens (a prompt chunk, or its last token)."""
        return self.prefilled + n if self.prompt_left else self.request.prompt_len + len(self.served.token_times)


@dataclass(frozen=True)
class Limits:
    """What the scheduler may run at once: sequences, KV tokens reserved, tokens per step (None: no limit)."""

    max_batch: int = 64
    kv_capacity: int | None = None
    max_tokens_per_step: int | None = None

    def __post_init__(self) -> None:
        positive_int("max_batch", self.max_batch)
        if self.kv_capacity is not None:
            positive_int("kv_capacity", self.kv_capacity)
        if self.max_tokens_per_step is not None:
            positive_int("max_tokens_per_step", self.max_tokens_per_step)
            if self.max_tokens_per_step < self.max_batch:
                raise ValueError(f"max_tokens_per_step ({self.max_tokens_per_step}) must be >= max_batch "
                                 f"({self.max_batch}) so every running sequence can decode in a step")

    @property
    def token_budget(self) -> float:
        """Tokens one step may hold: max_tokens_per_step, or inf without a budget."""
        return math.inf if self.max_tokens_per_step is None else self.max_tokens_per_step


def schedule(running: deque[Seq], waiting: deque[Seq], limits: Limits,
             policy: str = "fifo") -> list[tuple[Seq, int]]:
    """What runs this step: admit waiting sequences, then plan (sequence, new tokens) in the
    policy's order."""
    one_of("policy", policy, POLICIES)
    reserved = sum(seq.reserved for seq in running)
    # admit in arrival order while a slot is free
    while waiting and len(running) < limits.max_batch:
        seq = waiting[0]
        if limits.kv_capacity is not None and reserved + seq.reserved > limits.kv_capacity:
            break  # its KV does not fit yet: it waits, and so does everyone behind it
        running.append(waiting.popleft())
        reserved += seq.reserved
    decodes = [seq for seq in running if not seq.prompt_left]
    prompts = [seq for seq in running if seq.prompt_left]  # in admission order
    if policy == "fifo":  # decodes first, then prompts
        order = decodes + prompts
    else:  # prefill_first: a prompt begun in an earlier step, then decodes, then new prompts
        begun = [seq for seq in prompts if seq.prefilled]
        order = begun + decodes + [seq for seq in prompts if not seq.prefilled]
    plan, budget = [], limits.token_budget
    for seq in order:  # one budget: a decode takes 1 token, a prompt what is left (or what fits)
        if budget > 0:
            plan.append((seq, min(seq.prompt_left or 1, budget)))
            budget -= plan[-1][1]
    return plan


def postprocess(plan: list[tuple[Seq, int]], now: float, running: deque[Seq]) -> list[Seq]:
    """The step's end at `now`: new tokens appear (a prompt's last chunk yields its first); return
    the finished."""
    finished = []
    for seq, n in plan:
        if seq.prompt_left:
            seq.prefilled += n
            if seq.prompt_left:
                continue  # a prompt chunk with more to come: no token yet
        seq.served.token_times.append(now)
        if seq.done:
            running.remove(seq)
            finished.append(seq)
    return finished
