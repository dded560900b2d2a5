"""Checks: self-checks that fail when a lesson's claim is wrong on this machine (`check`), checks of the course's own
arithmetic that no machine can fail (`check_model`), and answer checks for exercises."""

from __future__ import annotations

import math

NOISY_MACHINE_HINT = ("If the evidence is a time or a rate, other programs on this machine can push it out of the "
                      "band: close them and run the cell again. If it fails again, this machine does not show "
                      "the claim as stated, and the evidence says by how much.")


def check(condition: bool, claim: str, evidence: str = "") -> None:
    """Assert a claim the notebook makes; print it with its evidence, or fail with that evidence and what to try."""
    if not condition:
        raise AssertionError(f"Self-check failed: {claim}. Evidence: {evidence}\n{NOISY_MACHINE_HINT}")
    print(f"✓ {claim}" + (f"  [{evidence}]" if evidence else ""))


def check_model(condition: bool, claim: str, evidence: str = "") -> None:
    """Assert a claim about the course's own arithmetic (specs, formulas, seeded simulations), not this machine."""
    if not condition:
        raise AssertionError(f"Model check failed: {claim}. Evidence: {evidence}")
    print(f"✓ (model) {claim}" + (f"  [{evidence}]" if evidence else ""))


def check_answer(answer: float | None, expected: float, *, rel_tol: float = 0.05, unit: str = "") -> None:
    """Tell a learner whether a numeric answer is within `rel_tol` of the expected value."""
    if answer is None:
        print("Not answered yet: replace None with your answer and run the cell again.")
    elif math.isclose(answer, expected, rel_tol=rel_tol):
        print(f"Correct: {answer:,.4g} {unit}".rstrip())
    else:
        direction = "high" if answer > expected else "low"
        print(f"Not quite: {answer:,.4g} {unit} is too {direction} (by more than {rel_tol:.0%}). Try again.")


def check_choice(answer: str | None, expected: str, choices: tuple[str, ...]) -> None:
    """Tell a learner whether they picked the right option out of `choices`."""
    if answer is None:
        print(f"Not answered yet: set answer to one of {choices}.")
        return
    if answer not in choices:
        raise ValueError(f"answer must be one of {choices}, got {answer!r}")
    print("Correct." if answer == expected else "Not quite: look at the measurements above again.")
