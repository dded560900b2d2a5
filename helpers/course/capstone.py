"""Chapter 8's models and figure: registry architectures cut to fewer layers, and predicted against measured."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..plumbing.models import ModelSpec, architecture_spec, model_spec
from ..plumbing.plots import new_figure
from ..plumbing.validate import in_range


def layer_spec(name: str, n_layers: int | None = None) -> ModelSpec:
    """A registry architecture cut to `n_layers` layers (all if None), its parameters counted on the meta device.

    Every layer is alike, so fewer layers keep the architecture (widths, heads, vocabulary) and its per-layer
    costs; the parameter count is the cut model's own, tied weights counted once."""
    spec = model_spec(name)
    if n_layers is None:
        return spec
    return architecture_spec(spec, n_layers=int(in_range("n_layers", n_layers, 1, spec.n_layers)))


def plot_predictions(table: pd.DataFrame, breakdowns: pd.DataFrame, title: str):
    """Left: predicted against measured seconds (calibrated and spec sheet). Right: each row's predicted terms."""
    fig, (left, right) = new_figure(2, width=6.0, height=4.5)
    for column, marker in (("predicted_s", "o"), ("spec_sheet_s", "x")):
        left.loglog(table["measured_s"], table[column], marker, ls="", label=column.removesuffix("_s"))
    lims = [table[["measured_s", "predicted_s", "spec_sheet_s"]].min().min() / 1.5, table["measured_s"].max() * 1.5]
    left.plot(lims, lims, "k-", lw=1, label="prediction = measurement")
    left.fill_between(lims, [v / 1.2 for v in lims], [v * 1.2 for v in lims], color="gray", alpha=0.2, label="±20%")
    left.set(xlabel="measured seconds", ylabel="predicted seconds", title=title)
    left.legend(fontsize=8)
    pivot = breakdowns.pivot_table(index="row", columns="term", values="time_s", aggfunc="sum", sort=False)
    shares = pivot.div(pivot.sum(axis=1), axis=0)  # each prediction as 100%, so prefill and decode compare
    left_edge = np.zeros(len(shares))
    for term in shares.columns:
        right.barh(shares.index, shares[term], left=left_edge, label=term)
        left_edge += shares[term].to_numpy()
    ratio = table.set_index("row")["measured_s"] / pivot.sum(axis=1)
    right.plot(ratio.reindex(shares.index), shares.index, "k|", ms=12, label="measured / predicted")
    right.set(xlim=(0, max(2.0, float(ratio.max()) * 1.05)), xlabel="share of the predicted time",
              title="what each prediction is made of")
    right.tick_params(axis="y", labelsize=7)
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    fig.tight_layout()
    return fig
