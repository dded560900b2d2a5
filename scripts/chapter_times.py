"""How long each chapter takes a learner, estimated from the notebooks and the seat table's measured run times.

    python scripts/chapter_times.py                      # prints the table
    python scripts/chapter_times.py --out docs/chapter-times.md

The estimate adds three parts, each from something counted or measured:
- reading: the words of the Markdown cells at PROSE_WPM, and of the code cells at CODE_WPM (code is read
  slower than prose); the words of collapsed answers are left out (a learner opens them after answering);
- exercises: MINUTES_PER_EXERCISE for each exercise the chapter checks (`check_exercise("N.M", ...)`);
- running: the chapter's time in the default `cpu` profile with 2 CPUs, from docs/seat-table.csv (measured
  by scripts/seat_table.py on the machine it names), counted in full although a learner reads while cells run.
A course meeting of MEETING_MIN minutes holds a chapter whose total is within it.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
PROSE_WPM = 150  # technical prose, read with care
CODE_WPM = 50  # code, read to follow what it does
MINUTES_PER_EXERCISE = 5  # read the question, work out a number, enter it, read the feedback
MEETING_MIN = 120
ANSWER = re.compile(r"<details>.*?</details>", re.S)


def count(notebook: Path) -> dict:
    """Cells, words of prose and code (collapsed answers left out), and exercises of one notebook."""
    cells = json.loads(notebook.read_text())["cells"]
    prose = " ".join(ANSWER.sub("", "".join(c["source"])) for c in cells if c["cell_type"] == "markdown")
    code = " ".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    exercises = set(re.findall(r"check_exercise\(\s*\"([\d.]+)\"", code))
    return {"chapter": notebook.stem, "cells": len(cells), "prose words": len(prose.split()),
            "code words": len(code.split()), "exercises": len(exercises)}


def chapter_times(seat_csv: Path = ROOT / "docs" / "seat-table.csv") -> pd.DataFrame:
    """One row per chapter: the counts, the three parts of the estimate and their total, in minutes."""
    table = pd.DataFrame([count(p) for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))])
    seat = pd.read_csv(seat_csv)
    run = seat[(seat["profile"] == "cpu") & (seat["cpus"] == 2) & ~seat["neighbour"]]
    run_min = run.set_index(run["notebook"].str.removesuffix(".ipynb"))["seconds"] / 60
    table["reading min"] = table["prose words"] / PROSE_WPM + table["code words"] / CODE_WPM
    table["exercise min"] = table["exercises"] * MINUTES_PER_EXERCISE
    table["run min (cpu profile)"] = table["chapter"].map(run_min)
    table["total min"] = table[["reading min", "exercise min", "run min (cpu profile)"]].sum(axis=1)
    table["meetings"] = -(-table["total min"] // MEETING_MIN)  # of MEETING_MIN minutes, rounded up
    return table


def markdown(table: pd.DataFrame, seat_csv: Path) -> str:
    """The table in Markdown, with how it was estimated."""
    header = (f"Estimated by `scripts/chapter_times.py`: prose at {PROSE_WPM} words/min, code at {CODE_WPM} "
              f"words/min (collapsed answers left out), {MINUTES_PER_EXERCISE} min per checked exercise, "
              f"and the chapter's run time in the `cpu` profile on 2 CPUs from `{seat_csv.relative_to(ROOT)}` "
              f"(see `docs/seat-table.md` for the machine). Meetings: of {MEETING_MIN} minutes.\n\n")
    return header + table.round(1).to_markdown(index=False) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seat-csv", type=Path, default=ROOT / "docs" / "seat-table.csv")
    parser.add_argument("--out", type=Path, help="write the Markdown table here as well")
    args = parser.parse_args(argv)
    text = markdown(chapter_times(args.seat_csv), args.seat_csv.resolve())
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
