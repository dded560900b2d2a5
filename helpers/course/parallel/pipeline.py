"""Chapter 10, pipeline parallelism on paper: the layers cut into stages, one device each, micro-batches flowing
through them. A stage can start a micro-batch only once the stage before has passed it on, so the first and last
stages wait at the start and at the end of every batch: the bubble."""

from __future__ import annotations

import pandas as pd

from ...plumbing.validate import positive_int


def pipeline_schedule(stages: int, micro_batches: int) -> pd.DataFrame:
    """When each stage runs each micro-batch (GPipe order, forward only), in units of one stage's time per
    micro-batch: stage s takes micro-batch m from s + m to s + m + 1."""
    p, m = positive_int("stages", stages), positive_int("micro_batches", micro_batches)
    return pd.DataFrame([{"stage": s, "micro_batch": k, "start": s + k, "end": s + k + 1}
                         for s in range(p) for k in range(m)])


def bubble_fraction(stages: int, micro_batches: int) -> float:
    """The share of stage-time spent idle in one batch: (p - 1) / (m + p - 1)."""
    p, m = positive_int("stages", stages), positive_int("micro_batches", micro_batches)
    return (p - 1) / (m + p - 1)


def plot_pipeline(ax, stages: int, micro_batches: int, title: str = "") -> None:
    """The schedule as bars, one row per stage, one colour per micro-batch; the idle cells are the bubble."""
    schedule = pipeline_schedule(stages, micro_batches)
    for row in schedule.itertuples():
        ax.barh(row.stage, 1, left=row.start, color=f"C{row.micro_batch % 10}", edgecolor="white")
        ax.text(row.start + 0.5, row.stage, str(row.micro_batch), ha="center", va="center", fontsize=7,
                color="white")
    ax.set_yticks(range(stages), [f"stage {s} (device {s})" for s in range(stages)])
    ax.invert_yaxis()
    ax.set_xlabel("time (one stage's work on one micro-batch = 1)")
    ax.set_title(title or f"{stages} stages, {micro_batches} micro-batches: "
                 f"{bubble_fraction(stages, micro_batches):.0%} of stage-time idle", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
