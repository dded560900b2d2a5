"""Chapter 5, the simulator's step trace as a picture: one row per request, one box per step."""

from __future__ import annotations

from collections.abc import Sequence

from .simulation import Simulation

TRACE_COLORS = {"prefill": "tab:orange", "decode": "tab:blue", "padding": "lightgray", "stalled": "khaki",
                "waiting": "white"}


def plot_trace(sim: Simulation, ax, names: Sequence[str] | None = None) -> None:
    """Draw a traced simulation: one row per request, one box per step, coloured by what the request did."""
    if sim.trace is None:
        raise ValueError("this simulation has no trace: run simulate(..., trace=True)")
    ids = sorted(sim.trace["id"].unique())
    label = dict(zip(ids, names or [str(i) for i in ids], strict=True))
    for row in sim.trace.itertuples(index=False):
        y = ids.index(row.id)
        ax.broken_barh([(row.start_s, row.seconds)], (y - 0.4, 0.8), facecolors=TRACE_COLORS[row.state],
                       edgecolor="black", lw=0.6, hatch="//" if row.state == "waiting" else None)
        if row.tokens:
            ax.text(row.start_s + row.seconds / 2, y, f"{row.state} {row.tokens}", ha="center", va="center", fontsize=7)
    for s in sim.served:
        y = ids.index(s.request.id)
        ax.plot(s.token_times, [y + 0.45] * len(s.token_times), "kv", ms=5)  # a token appears
        ax.plot([s.request.arrival], [y], "k>", ms=7)  # the request arrives
    ax.set_yticks(range(len(ids)), [label[i] for i in ids])
    ax.set_xlabel("time (s)")
    ax.set_title(sim.scheduler, fontsize=9)
