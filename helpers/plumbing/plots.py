"""Plots: the lab's shared figure style and the roofline later notebooks fill with points."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from .results import load_reference


def new_figure(ncols: int = 1, width: float = 6.5, height: float = 4.0):
    """A figure with `ncols` axes side by side, in the lab's size."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    return fig, list(axes[0])


def plain_log_ticks(axis, unit: str = "") -> None:
    """Label a log axis at 1, 2 and 5 times each power of ten, as plain numbers (0.2, 1, 5 and a unit), its minor
    ticks not at all: a log axis spanning less than a few decades otherwise labels its minor ticks too, and they
    collide."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}{unit}"))
    axis.set_minor_formatter(NullFormatter())


def plot_roofline(peak_flops: float, bandwidth: float, ax=None, label: str = "this device",
                  points: pd.DataFrame | None = None, intensity_range: tuple[float, float] = (0.05, 5000)):
    """Draw attainable FLOP/s = min(peak, bandwidth x intensity) on log-log axes, with optional points.

    `points` needs columns `intensity` (FLOP/byte), `flops_per_s` and `label`.
    """
    if ax is None:
        _, (ax,) = new_figure()
    x = np.logspace(np.log10(intensity_range[0]), np.log10(intensity_range[1]), 200)
    ridge = peak_flops / bandwidth
    ax.loglog(x, np.minimum(peak_flops, bandwidth * x), lw=2, label=f"roofline: {label}")
    ax.axvline(ridge, ls="--", color="gray", lw=1)
    ax.annotate(f"ridge {ridge:.3g} FLOP/B", (ridge, peak_flops), textcoords="offset points", xytext=(5, -15),
                fontsize=9, color="gray")
    if points is not None and not points.empty:
        for label_, group in points.groupby("label", sort=False):
            ax.loglog(group["intensity"], group["flops_per_s"], "o", label=label_)
    ax.set_xlabel("arithmetic intensity (FLOP / byte)")
    ax.set_ylabel("attainable rate (FLOP/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def plot_reference(ax, notebook: str, name: str, x: str, y: str, scale: float = 1.0) -> int:
    """Draw the same table measured on other hardware (reference/) as dashed lines; returns how many devices."""
    reference = load_reference(notebook, name)
    if reference.empty or x not in reference or y not in reference:
        return 0
    for device, group in reference.groupby("device"):
        group = group.sort_values(x)
        ax.plot(group[x], group[y] * scale, "--", alpha=0.7, label=f"reference: {device} ({group['profile'].iloc[0]})")
    ax.legend(fontsize=8)
    return reference["device"].nunique()


def plot_measured_vs_predicted(ax, x, measured, predicted: dict[str, object], *, xlabel: str, ylabel: str,
                               title: str, spread=None, log: bool = True):
    """Measured points (with an optional (low, high) spread) against one or more predicted curves.

    `predicted` maps a label ("roofline", "roofline + cache copies") to y values at the same x."""
    x, measured = np.asarray(x, float), np.asarray(measured, float)
    if spread is not None:
        low, high = (np.asarray(v, float) for v in spread)
        yerr = np.clip([measured - low, high - measured], 0, None)  # a spread around the median may not hold the point
        ax.errorbar(x, measured, yerr=yerr, fmt="o", capsize=3, label="measured")
    else:
        ax.plot(x, measured, "o", label="measured")
    for i, (label, y) in enumerate(predicted.items()):
        ax.plot(x, np.asarray(y, float), ["--", ":", "-."][i % 3], label=f"predicted: {label}")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
