"""Merge a class's exported lab results (one file per seat, from `helpers.export_results()`) into tables and a plot.

    python scripts/merge_class_results.py handed-in/                 # writes into the current folder
    python scripts/merge_class_results.py handed-in/ --out merged/

Writes class-results.csv (every seat's saved tables, one long table), class-summary.csv (one row per seat:
ceilings, median prediction error, self-checks, worst contention) and class-summary.png. Files it cannot read
(not JSON, made by a newer lab) are named and skipped; files from older labs are read as far as they go.
Exits 0 when at least one file was read (skipped ones printed), 2 when none was.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display needed
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.plumbing.class_merge import class_summary, merge_results  # noqa: E402


def bar_per_seat(ax, seats: pd.Series, values: pd.Series, ylabel: str, title: str) -> None:
    """One bar per seat, every seat on the axis; "n/a" where the seat's file had no such number."""
    positions = range(len(seats))
    ax.bar(positions, values.fillna(0))
    for x in (x for x, value in zip(positions, values, strict=True) if pd.isna(value)):
        ax.annotate("n/a", (x, 0), ha="center", va="bottom", color="grey")
    ax.set_xticks(list(positions), seats.astype(str), rotation=45, ha="right")
    ax.set(xlabel="seat", ylabel=ylabel, title=title)
    ax.set_ylim(bottom=0)
    ax.grid(True, axis="y", alpha=0.3)


def plot_class_summary(summary: pd.DataFrame) -> plt.Figure:
    """Per seat, its copy bandwidth (GB/s) and its median |predicted / measured - 1| (%), side by side."""
    fig, (bandwidth, error) = plt.subplots(1, 2, figsize=(max(8.0, 4 + 0.5 * len(summary)), 4.5))
    bar_per_seat(bandwidth, summary["seat"], summary["copy_GB_per_s"], "copy bandwidth (GB/s)",
                 "Measured copy bandwidth")
    bar_per_seat(error, summary["seat"], 100 * summary["median_abs_prediction_error"],
                 "median |predicted / measured - 1| (%)", "Prediction error, every saved prediction")
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    """Merge the folder, print what was skipped and the summary, write the tables and the plot."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="folder of exported lab-results-*.json files")
    parser.add_argument("--out", type=Path, default=Path("."), help="folder for the outputs (default: here)")
    args = parser.parse_args(argv)
    table, messages = merge_results(args.folder)
    for message in messages:
        print(message)
    summary = class_summary(args.folder)
    if summary.empty:
        print(f"no readable lab results file in {args.folder}: nothing merged")
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    table.to_csv(args.out / "class-results.csv", index=False)
    summary.to_csv(args.out / "class-summary.csv", index=False)
    plot_class_summary(summary).savefig(args.out / "class-summary.png", dpi=120)
    print(summary.to_string(index=False))
    print(f"{len(summary)} seat(s), {len(table)} row(s); wrote class-results.csv, class-summary.csv and "
          f"class-summary.png in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
