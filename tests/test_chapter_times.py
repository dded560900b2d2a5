"""The README's chapter times are the estimate scripts/chapter_times.py makes (a unit test of the course's own
arithmetic: it keeps the stated times from drifting from the notebooks they describe)."""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import chapter_times  # noqa: E402  (a script, not a package)


def test_readme_states_each_chapters_estimated_time():
    table = chapter_times.chapter_times().set_index("chapter")
    stated = dict(re.findall(r"\| `(\d\d-[a-z-]+)\.ipynb` \|.*\| about (\d+) min", (ROOT / "README.md").read_text()))
    assert sorted(stated) == sorted(table.index)
    for chapter, minutes in stated.items():
        assert int(minutes) == 5 * round(table.loc[chapter, "total min"] / 5), chapter


def test_chapter_times_doc_is_the_scripts_output():
    seat_csv = ROOT / "docs" / "seat-table.csv"
    expected = chapter_times.markdown(chapter_times.chapter_times(seat_csv), seat_csv)
    assert (ROOT / "docs" / "chapter-times.md").read_text() == expected


def test_count_leaves_collapsed_answers_out(tmp_path):
    notebook = tmp_path / "99-x.ipynb"
    notebook.write_text('{"cells": [{"cell_type": "markdown", "source": ["one two <details>three four</details>"]},'
                        ' {"cell_type": "code", "source": ["helpers.check_exercise(\\"9.1\\", a)"]}]}')
    counted = chapter_times.count(notebook)
    assert counted["prose words"] == 2 and counted["exercises"] == 1 and counted["cells"] == 2
