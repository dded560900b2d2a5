"""Chapter 8's models and figure: registry architectures cut to fewer layers (and narrowed), each row's architecture
kind, the errors summarised by kind, and predicted against measured."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..plumbing.models import ModelSpec, architecture_spec, model_spec
from ..plumbing.plots import new_figure
from ..plumbing.validate import in_range, positive_int

# Fields a narrowed copy may change, as the spec-table names them (widths, counts and the window).
CUT_FIELDS = {"n_layers": "layers", "d_model": "width", "n_heads": "heads", "n_kv_heads": "KV heads", "d_ff": "MLP",
              "n_experts": "experts", "experts_per_token": "experts per token", "expert_d_ff": "expert width",
              "n_dense_layers": "dense layers", "q_lora_rank": "query latent", "kv_lora_rank": "KV latent",
              "vocab_size": "vocabulary", "sliding_window": "window"}
KINDS = ("dense", "MoE", "MLA", "sliding")


def layer_spec(name: str, n_layers: int | None = None) -> ModelSpec:
    """A registry architecture cut to `n_layers` layers (all if None), its parameters counted on the meta device.

    Every layer is alike, so fewer layers keep the architecture (widths, heads, vocabulary) and its per-layer
    costs; the parameter count is the cut model's own, tied weights counted once."""
    spec = model_spec(name)
    if n_layers is None:
        return spec
    return architecture_spec(spec, n_layers=int(in_range("n_layers", n_layers, 1, spec.n_layers)))


def narrowed_spec(name: str, n_layers: int, **widths: int) -> ModelSpec:
    """A published registry architecture cut to `n_layers` layers and narrowed to `widths` (d_model=512, ...),
    named after it and its new size, its parameters counted again. The kinds of layer (experts, latent, window)
    stay; `what_was_cut` lists every change."""
    spec = model_spec(name)
    n = int(in_range("n_layers", n_layers, 1, spec.n_layers))
    allowed = sorted(set(CUT_FIELDS) - {"n_layers"})
    if set(widths) - set(allowed):
        raise ValueError(f"widths may change only {allowed}, got {sorted(set(widths) - set(allowed))}")
    d_model = widths.get("d_model", spec.d_model)
    return architecture_spec(spec, n_layers=n, name=f"{name} ({n} layers, {d_model} wide)", hub_id="", **widths)


def what_was_cut(spec: ModelSpec, published: ModelSpec) -> str:
    """The fields where `spec` differs from the published architecture, as 'layers 48→2, width 2048→512, ...'."""
    changes = [f"{label} {getattr(published, field):,}→{getattr(spec, field):,}" for field, label in CUT_FIELDS.items()
               if getattr(spec, field) != getattr(published, field)]
    return ", ".join(changes) or "nothing"


def architecture_kind(spec: ModelSpec, context: int) -> str:
    """What sets a step of `spec` at `context` tokens apart: 'MLA' (latent attention, with or without experts),
    'MoE', 'sliding' (a window shorter than the context), else 'dense' (a window the context never reaches too)."""
    positive_int("context", context)
    if spec.kv_lora_rank:
        return "MLA"
    if spec.n_experts:
        return "MoE"
    if "sliding" in spec.layer_types and spec.sliding_window < context:
        return "sliding"
    return "dense"


def error_summary(table: pd.DataFrame, by: str | None = None,
                  columns: tuple[str, ...] = ("error", "spec_sheet_error")) -> pd.DataFrame:
    """Rows, median |error| and mean signed error of each error column, per value of `by` and over all rows.

    The median of |error| says how far a predictor typically lands; the mean of the signed error says whether it
    leans one way (a term missing or charged twice), which the median of |error| hides."""
    def summary(rows: pd.DataFrame) -> pd.Series:
        stats = {"rows": len(rows)}
        for column in columns:
            stats[f"median |{column}|"] = rows[column].abs().median()
            stats[f"mean signed {column}"] = rows[column].mean()
        return pd.Series(stats)

    groups = [] if by is None else [(key, summary(rows)) for key, rows in table.groupby(by, sort=False)]
    return pd.DataFrame(dict(groups + [("all rows", summary(table))])).T.astype({"rows": int})


def plot_predictions(table: pd.DataFrame, breakdowns: pd.DataFrame, title: str):
    """Left: predicted against measured seconds (calibrated, by architecture kind if the table has a `kind` column,
    and spec sheet). Right: each row's predicted terms."""
    fig, (left, right) = new_figure(2, width=6.0, height=max(4.5, 0.16 * table["row"].nunique()))
    kinds = table.groupby("kind", sort=False) if "kind" in table else [("calibrated", table)]
    for (kind, rows), marker in zip(kinds, "osD^v<>", strict=False):
        left.loglog(rows["measured_s"], rows["predicted_s"], marker, ls="", label=f"predicted ({kind})")
    left.loglog(table["measured_s"], table["spec_sheet_s"], "x", color="gray", ls="", label="spec sheet")
    lims = [table[["measured_s", "predicted_s", "spec_sheet_s"]].min().min() / 1.5, table["measured_s"].max() * 1.5]
    left.plot(lims, lims, "k-", lw=1, label="prediction = measurement")
    left.fill_between(lims, [v / 1.2 for v in lims], [v * 1.2 for v in lims], color="gray", alpha=0.2, label="±20%")
    left.set(xlabel="measured step time (s)", ylabel="predicted step time (s)", title=title)
    left.legend(fontsize=8)
    pivot = breakdowns.pivot_table(index="row", columns="term", values="time_s", aggfunc="sum", sort=False)
    shares = pivot.div(pivot.sum(axis=1), axis=0)  # each prediction as 100%, so prefill and decode compare
    left_edge = np.zeros(len(shares))
    for term in shares.columns:
        right.barh(shares.index, shares[term], left=left_edge, label=term)
        left_edge += shares[term].to_numpy()
    ratio = table.set_index("row")["measured_s"] / pivot.sum(axis=1)
    right.plot(ratio.reindex(shares.index), shares.index, "k|", ms=12, label="measured / predicted")
    right.set(xlim=(0, max(2.0, float(ratio.max()) * 1.05)), xlabel="share of the predicted time (1 = all of it)",
              title="what each prediction is made of")
    right.tick_params(axis="y", labelsize=7)
    right.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    fig.tight_layout()
    return fig
