"""Chapter 7's one figure: predicted against measured speedup of each technique."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...plumbing.plots import new_figure


def plot_speedups(table: pd.DataFrame, title: str):
    """Each measured technique at (predicted, measured) speedup, with y = x and the break-even lines (1x)."""
    done = table.dropna(subset=["predicted_speedup", "measured_speedup"])
    fig, (ax,) = new_figure(width=7.5, height=5.5)
    for row in done.itertuples():
        ax.plot(row.predicted_speedup, row.measured_speedup, "o")
        ax.annotate(row.technique, (row.predicted_speedup, row.measured_speedup), fontsize=7,
                    textcoords="offset points", xytext=(4, 3))
    values = np.r_[done["predicted_speedup"], done["measured_speedup"], 1.0]
    span = np.array([values.min() / 1.5, values.max() * 1.5])
    ax.plot(span, span, "k--", lw=1, label="y = x (prediction exact)")
    ax.axhline(1.0, color="gray", lw=1, label="break-even (speedup 1)")
    ax.axvline(1.0, color="gray", lw=1, ls=":")
    ax.set(xscale="log", yscale="log", xlim=span, ylim=span, xlabel="predicted speedup (x, baseline / technique)",
           ylabel="measured speedup (x, baseline / technique)", title=title)
    ax.legend(fontsize=8, loc="upper left")
    return fig
