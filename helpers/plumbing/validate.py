"""Argument checks: one place that turns bad input into a ValueError naming the argument and its range."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def positive_int(name: str, value: object) -> int:
    """`value` as an int if it is an integer >= 1; else a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def positive(name: str, value: object) -> float:
    """`value` as a float if it is a number > 0 (inf allowed); else a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value > 0:
        raise ValueError(f"{name} must be a number > 0, got {value!r}")
    return float(value)


def non_negative(name: str, value: object) -> float:
    """`value` as a float if it is a number >= 0; else a ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) or not value >= 0:
        raise ValueError(f"{name} must be a number >= 0, got {value!r}")
    return float(value)


def in_range(name: str, value: object, low: float, high: float, *, include_high: bool = True) -> float:
    """`value` as a float if low <= value <= high (or < high); else a ValueError naming `name` and the range."""
    bad = isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating))
    if bad or math.isnan(value) or not (low <= value and (value <= high if include_high else value < high)):
        closing = "]" if include_high else ")"
        raise ValueError(f"{name} must be in [{low}, {high}{closing}, got {value!r}")
    return float(value)


def one_of(name: str, value: object, choices: Iterable[object]) -> object:
    """`value` if it is one of `choices`; else a ValueError naming `name` and the choices."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value
