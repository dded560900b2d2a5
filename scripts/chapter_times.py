"""How long each chapter takes a learner, estimated from the notebooks and the seat table's measured run times.

    python scripts/chapter_times.py                      # prints the table
    python scripts/chapter_times.py --out docs/chapter-times.md

The estimate adds three parts, each from something counted or measured:
- reading: the words of the Markdown cells at PROSE_WPM, and of the code cells at CODE_WPM (code is read
  slower than prose); the words of collapsed answers are left out (a learner opens them after answering);
- exercises: MINUTES_PER_EXERCISE for each exercise the chapter checks (`check_exercise("N.M", ...)`);
- running: the chapter's time in the default `cpu` profile with 2 CPUs, from docs/seat-table.csv (measured
  by scripts/seat_table.py on the machine it names), counted in full although a learner reads while cells run.

A section whose heading (`##` or `###`) says "(optional)" goes deeper, or is one a later chapter returns to: a
meeting may skip it. Its reading and exercises count as optional minutes, up to the next heading of the same or a
higher level (its cells still run: later cells may use what they compute). A course meeting of MEETING_MIN
minutes holds a chapter whose core (total less optional) is within it; a longer core is split at the `##`
section nearest its middle, named in the table.
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
HEADING = re.compile(r"(#{2,3}) (.*)")
EXERCISE = re.compile(r"check_exercise\(\s*\"([\d.]+)\"")


def count(notebook: Path) -> dict:
    """Cells, words of prose and code (collapsed answers left out) and exercises of one notebook, each in total
    and in its optional sections; and each `##` section's core reading minutes, in order (for the split)."""
    cells = json.loads(notebook.read_text())["cells"]
    words = {(kind, optional): 0 for kind in ("prose", "code") for optional in (False, True)}
    exercises: dict[str, bool] = {}  # id -> asked only in an optional section
    sections: list[list] = []  # [heading, core minutes]
    optional_level = 0  # the level of the optional heading we are under; 0: none
    for cell in cells:
        source = "".join(cell["source"])
        heading = HEADING.match(source) if cell["cell_type"] == "markdown" else None
        if heading:
            level = len(heading.group(1))
            if optional_level and level <= optional_level:
                optional_level = 0
            if not optional_level and "(optional)" in heading.group(2):
                optional_level = level
            if level == 2:
                sections.append([heading.group(2).split(" (")[0], 0.0])
        optional = bool(optional_level)
        if cell["cell_type"] == "markdown":
            n = len(ANSWER.sub("", source).split())
            words["prose", optional] += n
            minutes = n / PROSE_WPM
        else:
            n = len(source.split())
            words["code", optional] += n
            minutes = n / CODE_WPM
            for exercise in EXERCISE.findall(source):
                minutes += MINUTES_PER_EXERCISE * (exercise not in exercises and not optional)
                exercises[exercise] = exercises.get(exercise, True) and optional
        if sections and not optional:
            sections[-1][1] += minutes
    return {"chapter": notebook.stem, "cells": len(cells),
            "prose words": words["prose", False] + words["prose", True],
            "code words": words["code", False] + words["code", True],
            "exercises": len(exercises),
            "optional prose words": words["prose", True], "optional code words": words["code", True],
            "optional exercises": sum(exercises.values()), "sections": sections}


def second_meeting(sections: list[list]) -> str:
    """The `##` section nearest the middle of the core reading: where a second meeting starts."""
    total, done, best, where = sum(m for _, m in sections), 0.0, float("inf"), ""
    for heading, minutes in sections:
        if done and abs(done - total / 2) < best:
            best, where = abs(done - total / 2), heading
        done += minutes
    return where


def chapter_times(seat_csv: Path = ROOT / "docs" / "seat-table.csv") -> pd.DataFrame:
    """One row per chapter: the counts, the three parts of the estimate, the core and optional minutes, and the
    meetings the core needs (where the second starts, if it needs two)."""
    counts = [count(p) for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]-*.ipynb"))]
    table = pd.DataFrame(counts).drop(columns="sections")
    seat = pd.read_csv(seat_csv)
    run = seat[(seat["profile"] == "cpu") & (seat["cpus"] == 2) & ~seat["neighbour"]]
    run_min = run.set_index(run["notebook"].str.removesuffix(".ipynb"))["seconds"] / 60
    table["reading min"] = table["prose words"] / PROSE_WPM + table["code words"] / CODE_WPM
    table["exercise min"] = table["exercises"] * MINUTES_PER_EXERCISE
    table["run min (cpu profile)"] = table["chapter"].map(run_min)
    table["total min"] = table[["reading min", "exercise min", "run min (cpu profile)"]].sum(axis=1)
    table["optional min"] = (table["optional prose words"] / PROSE_WPM + table["optional code words"] / CODE_WPM
                             + table["optional exercises"] * MINUTES_PER_EXERCISE)
    table["core min"] = table["total min"] - table["optional min"]
    table["meetings"] = -(-table["core min"] // MEETING_MIN)  # of MEETING_MIN minutes, rounded up
    table["second meeting from"] = [second_meeting(c["sections"]) if meetings > 1 else ""
                                    for c, meetings in zip(counts, table["meetings"], strict=True)]
    return table.drop(columns=["optional prose words", "optional code words"])


def markdown(table: pd.DataFrame, seat_csv: Path) -> str:
    """The table in Markdown, with how it was estimated."""
    header = (f"Estimated by `scripts/chapter_times.py`: prose at {PROSE_WPM} words/min, code at {CODE_WPM} "
              f"words/min (collapsed answers left out), {MINUTES_PER_EXERCISE} min per checked exercise, "
              f"and the chapter's run time in the `cpu` profile on 2 CPUs from `{seat_csv.relative_to(ROOT)}` "
              f"(see `docs/seat-table.md` for the machine). A meeting may skip the sections headed "
              f"\"(optional)\" (they go deeper, or a later chapter returns to them): the core is the total less "
              f"them. Meetings: of {MEETING_MIN} minutes, for the core.\n\n")
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
