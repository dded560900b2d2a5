"""Curve fits the chapters use to read a law off measurements: power-law slopes and coefficients, lines."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _finite_positive(x, y) -> tuple[np.ndarray, np.ndarray]:
    """The (x, y) pairs where both are finite and > 0, as float arrays."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    return x[keep], y[keep]


def fit_loglog_slope(x, y) -> float:
    """Slope of log y against log x by least squares (the exponent p in y ~ x^p); NaNs are skipped."""
    x, y = _finite_positive(x, y)
    if len(x) < 2:
        raise ValueError(f"need at least 2 positive finite points to fit a slope, got {len(x)}")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def fit_power(x, y, power: float) -> float:
    """Coefficient c of y = c x^power that fits the points best in log space (geometric mean of y / x^p)."""
    x, y = _finite_positive(x, y)
    if not len(x):
        raise ValueError("need at least 1 positive finite point to fit a coefficient")
    return float(np.exp(np.mean(np.log(y) - power * np.log(x))))


def fit_line(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line through the finite points."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    if keep.sum() < 2:
        raise ValueError(f"need at least 2 finite points to fit a line, got {int(keep.sum())}")
    slope, intercept = np.polyfit(x[keep], y[keep], 1)
    return float(slope), float(intercept)
