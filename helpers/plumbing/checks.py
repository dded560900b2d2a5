"""Checks: self-checks that fail when a lesson's claim is wrong on this machine (`check`), checks of the course's own
arithmetic that no machine can fail (`check_model`), and answer checks for exercises.

A self-check has three outcomes. When the timings it rests on were taken while the machine was busy
(`contention`, measured against thresholds set in that module, never judged from the check's own result), it
re-measures where it can, within a time bound, and if the machine stays busy it says "could not decide" with
the evidence, as a warning: a neighbour's burst can fake a pass as well as a failure. On a quiet machine it
passes when its claim holds and fails when it does not. Every outcome is appended to `checks.jsonl` in
lab_dir(), which tests and `export_results` read."""

from __future__ import annotations

import datetime
import json
import math
import numbers
import os
import time
import warnings
from collections.abc import Callable

from . import contention as contention_module
from .contention import Contention

NOISY_MACHINE_HINT = ("If the evidence is a time or a rate, other programs on this machine can push it out of the "
                      "band: close them and run the cell again. If it fails again, this machine does not show "
                      "the claim as stated, and the evidence says by how much.")


BUSY_HINT = ("The machine was too busy for these timings to judge the claim either way. Run the chapter again "
             "when fewer programs (or fewer classmates' kernels) are running; on a quiet machine the check passes "
             "or fails.")
SPEED_HINT = ("A virtual machine's speed can swing for seconds or minutes with nothing visible running, so a "
              "measurement taken earlier no longer describes it. Run the chapter again; where a stored measurement "
              "(the ceilings, the calibration) was taken in a fast or a slow spell, measure it again "
              "(refresh=True).")
REMEASURE_S = 60.0  # the most a check spends re-measuring while the machine is busy
REMEASURE_TRIES = 3
CHECK_LOG = "checks.jsonl"


def log_outcome(claim: str, outcome: str, evidence: str, found: Contention, kept: Contention) -> None:
    """Append one check's outcome, evidence and contention (of its timings, and of busy measurements it rests
    on) to lab_dir()/checks.jsonl."""
    from .results import lab_dir  # here: results imports torch and transformers, which a check need not wait for

    entry = {"time": datetime.datetime.now().isoformat(timespec="seconds"), "claim": claim, "outcome": outcome,
             "evidence": evidence, "contention": found.as_dict(), "kept_while_busy": kept.as_dict(),
             "profile": os.environ.get("LAB_PROFILE", "")}
    with open(lab_dir() / CHECK_LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def read_check_log(path: str | os.PathLike | None = None) -> list[dict]:
    """Every logged check outcome (lab_dir()/checks.jsonl unless `path`), oldest first; a line that is not a
    JSON record (a kernel killed mid-write) is left out with a warning."""
    from .results import lab_dir

    path = path or lab_dir() / CHECK_LOG
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return []
    entries = []
    for number, line in enumerate(lines, start=1):
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if isinstance(entry, dict):
            entries.append(entry)
        elif line.strip():
            warnings.warn(f"left out line {number} of {path}, which is not a JSON record", stacklevel=2)
    return entries


def check(condition: bool, claim: str, evidence: str = "", *,
          remeasure: Callable[[], tuple[bool, str]] | None = None, contention: Contention | None = None,
          timed: bool = True) -> None:
    """Judge a claim the notebook makes about this machine; print it with its evidence and log the outcome.

    The contention of the timings behind it decides whether the timings can judge at all: what every watched
    timing since the last check saw, plus `contention` where given, plus any measurement this process kept
    from a busy moment. Busy (past the thresholds in `contention`): the claim is measured again with
    `remeasure()` (returning a new (condition, evidence)) while the machine stays busy, up to REMEASURE_TRIES
    times in REMEASURE_S seconds. Still busy: "undecided", printed as a warning with the evidence, whatever the
    condition says (a neighbour can fake a pass as well as a failure). Quiet: "pass", or "fail" as an
    AssertionError. `timed=False`: a claim that rests on no timing (the same tokens, a byte count read back from
    a real cache), which a busy machine cannot bend: it passes or fails whatever the load."""
    found = contention_module.recent() + (contention or Contention())
    if not timed:
        found = Contention()
    deadline, tries = time.monotonic() + REMEASURE_S, 0
    while found.busy and remeasure is not None and tries < REMEASURE_TRIES and time.monotonic() < deadline:
        print(f"… {claim}: measured while the machine was busy ({'; '.join(found.reasons)}): measuring again")
        with contention_module.watch():
            condition, evidence = remeasure()
        tries += 1
        found = contention_module.recent()
    kept = contention_module.baseline() if timed else Contention()  # a busy measurement this rests on
    reasons = found.reasons + [f"{reason} while a measurement this rests on was taken" for reason in kept.reasons]
    outcome = "undecided" if reasons else "pass" if condition else "fail"
    log_outcome(claim, outcome, evidence, found, kept)
    if outcome == "fail":
        raise AssertionError(f"Self-check failed: {claim}. Evidence: {evidence}\n{NOISY_MACHINE_HINT}")
    if outcome == "undecided":
        shown = "holds" if condition else "does not hold"
        moved = all(reason.startswith("this machine's own speed") for reason in reasons)
        why = "this machine's own speed moved" if moved else "this seat was busy"
        print(f"⚠ Could not decide: {claim}.\n  Why: {why}: {'; '.join(reasons)} ({found}).\n"
              f"  Here the claim {shown}: {evidence}\n{SPEED_HINT if moved else BUSY_HINT}")
        return
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


def your_answer(answer: float | str | None, exercise: str, against: float | str | None = None, *,
                unit: str = "", digits: int = 2) -> str:
    """The learner's answer to `exercise` for a reconcile line, beside what the chapter found (`against`).

    "yours 3.10 ms (error +5%)" for a number (error = answer / against - 1), "yours: fifo (found: static)" for a
    choice, "no answer given to exercise 9.3" while the answer cell still holds None."""
    if answer is None or answer == "":
        return f"no answer given to exercise {exercise}"
    if isinstance(answer, str):
        return f"yours: {answer}" + ("" if against is None else f" (found: {against})")
    text = f"yours {answer:,.{digits}f} {unit}".rstrip()
    if isinstance(against, numbers.Real) and against:  # numpy's numbers too
        text += f" (error {answer / against - 1:+.0%})"
    return text


def check_choice(answer: str | None, expected: str, choices: tuple[str, ...]) -> None:
    """Tell a learner whether they picked the right option out of `choices`."""
    if answer is None:
        print(f"Not answered yet: set answer to one of {choices}.")
        return
    if answer not in choices:
        raise ValueError(f"answer must be one of {choices}, got {answer!r}")
    print("Correct." if answer == expected else "Not quite: look at the measurements above again.")
