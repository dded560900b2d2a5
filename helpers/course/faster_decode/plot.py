"""Chapter 7's one figure: predicted against measured speedup of each technique."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...plumbing.plots import new_figure, plain_log_ticks


def plot_speedups(table: pd.DataFrame, title: str):
    """Each measured technique at (predicted, measured) speedup, with y = x and the break-even lines (1x)."""
    done = table.dropna(subset=["predicted_speedup", "measured_speedup"])
    fig, (ax,) = new_figure(width=9.5, height=5.5)
    # each point numbered, its technique in the legend: techniques often land within a few percent of each
    # other, where names written beside the points overprint
    for k, row in enumerate(done.sort_values("predicted_speedup").itertuples(), start=1):
        (point,) = ax.plot(row.predicted_speedup, row.measured_speedup, "o", label=f"{k}: {row.technique}")
        ax.annotate(str(k), (row.predicted_speedup, row.measured_speedup), fontsize=7, color=point.get_color(),
                    textcoords="offset points", xytext=(4, 3 if k % 2 else -9))
    values = np.r_[done["predicted_speedup"], done["measured_speedup"], 1.0]
    span = np.array([values.min() / 1.5, values.max() * 1.5])
    ax.plot(span, span, "k--", lw=1, label="y = x (prediction exact)")
    ax.axhline(1.0, color="gray", lw=1, label="break-even (speedup 1)")
    ax.axvline(1.0, color="gray", lw=1, ls=":")
    ax.set(xscale="log", yscale="log", xlim=span, ylim=span, xlabel="predicted speedup (x, baseline / technique)",
           ylabel="measured speedup (x, baseline / technique)", title=title)
    ticks = [2.0**k for k in range(-8, 9) if span[0] <= 2.0**k <= span[1]]  # halvings and doublings
    for axis in (ax.xaxis, ax.yaxis):
        plain_log_ticks(axis, "x")
        axis.set_ticks(ticks)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    return fig
