"""Exercises: each chapter's expected answers, kept out of the notebooks and checked by exercise id.

`check_exercise("2.1", answer)` looks the exercise up in `ch2.EXERCISES`. An entry is either
`Numeric(expected, rel_tol, unit)`, whose `expected(**context)` computes the answer from the lab's formulas
(never a typed number), or `Choice(expected, choices)`. Notebooks pass what an answer depends on, such as
the ceilings they measured, as keyword arguments; a keyword the exercise does not take is an error, so a
misspelt one is never graded against a default.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from ..plumbing.checks import check_answer, check_choice


@dataclass(frozen=True)
class Numeric:
    """A numeric exercise: `expected(**context)` computes the answer; within `rel_tol` counts as right."""

    expected: Callable[..., float]
    rel_tol: float = 0.05
    unit: str = ""


@dataclass(frozen=True)
class Choice:
    """A multiple-choice exercise."""

    expected: str
    choices: tuple[str, ...]


def exercise(exercise_id: str) -> Numeric | Choice:
    """The entry for an exercise id such as '2.1' (chapter 2, exercise 1)."""
    chapter, _, number = exercise_id.partition(".")
    if not (chapter.isdigit() and number.isdigit()):
        raise ValueError(f"exercise_id must look like '2.1' (chapter.exercise), got {exercise_id!r}")
    try:
        table = importlib.import_module(f".ch{int(chapter)}", __name__).EXERCISES
    except ModuleNotFoundError:
        table = {}
    if exercise_id not in table:
        raise ValueError(f"exercise_id {exercise_id!r} is unknown; chapter {chapter} has {sorted(table)}")
    return table[exercise_id]


def context_keywords(entry: Numeric | Choice) -> tuple[str, ...]:
    """The keyword arguments an exercise's answer depends on (none for a multiple-choice one)."""
    if isinstance(entry, Choice):
        return ()
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return tuple(p.name for p in inspect.signature(entry.expected).parameters.values() if p.kind in named)


def check_exercise(exercise_id: str, answer: float | str | None, **context: object) -> None:
    """Tell the learner whether `answer` to exercise `exercise_id` is right, without showing the answer."""
    entry = exercise(exercise_id)
    allowed = context_keywords(entry)
    unknown = sorted(set(context) - set(allowed))
    if unknown:
        takes = ", ".join(allowed) if allowed else "no keyword arguments"
        raise TypeError(f"check_exercise({exercise_id!r}) got unknown keyword(s) {', '.join(unknown)}; "
                        f"exercise {exercise_id} takes: {takes}")
    if isinstance(entry, Choice):
        check_choice(answer, entry.expected, entry.choices)
    else:
        check_answer(answer, entry.expected(**context), rel_tol=entry.rel_tol, unit=entry.unit)
