"""What a step does, and what every step-time model answers about it.

A step is one forward of an engine over some sequences. `Work` lists, per sequence, the new tokens it adds
and the tokens its cache holds after the step: a prefill of n tokens is `[(n, n)]`, a decode step of a batch
of B sequences at context c is `[(1, c)] * B`. Every step cost in the lab is a callable `cost(work) -> seconds`:
the roofline (`RooflineStepCost`), a line fitted to steps timed here (`LinearStepCost`), or the calibrated
step model (`CalibratedStepCost`); the simulator of chapter 5 takes any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

Work = Sequence[tuple[int, int]]  # one (new tokens this step, context length after the step) per sequence


class StepCost(Protocol):
    """Anything that prices a step: `cost(work)` returns its seconds."""

    def __call__(self, work: Work) -> float: ...


def check_work(work: Work) -> None:
    """ValueError naming `work` unless each entry is (new >= 1, context >= new) in integers."""
    for new, context in work:
        if int(new) != new or int(context) != context or not 1 <= new <= context:
            raise ValueError(f"work must hold (new tokens >= 1, context after >= new tokens) per sequence, "
                             f"got {(new, context)!r}")
