"""The README's chapter times are the estimate scripts/chapter_times.py makes (a unit test of the course's own
arithmetic: it keeps the stated times from drifting from the notebooks they describe)."""

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import chapter_times  # noqa: E402  (a script, not a package)


def test_readme_states_each_chapters_estimated_time():
    table = chapter_times.chapter_times().set_index("chapter")
    rows = re.findall(r"\| `(\d\d-[a-z-]+)\.ipynb` \|.*\| about (\d+) min(?: \(\+(\d+) optional\))?"
                      r"(?:, (\d) meetings: the second from ([\d.]+))? \|", (ROOT / "README.md").read_text())
    assert sorted(r[0] for r in rows) == sorted(table.index)
    for chapter, core, optional, meetings, second in rows:
        row = table.loc[chapter]
        assert int(core) == 5 * round(row["core min"] / 5), chapter
        assert int(optional or 0) == 5 * round(row["optional min"] / 5), chapter
        assert int(meetings or 1) == row["meetings"], chapter
        assert second == row["second meeting from"].split(" ")[0], chapter


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


def test_an_optional_section_ends_at_the_next_heading_of_its_level(tmp_path):
    def markdown(text):
        return {"cell_type": "markdown", "source": [text]}

    cells = [markdown("## 9.1 Core"), markdown("## 9.2 Deeper (optional)"), markdown("### 9.2.1 Inside it"),
             {"cell_type": "code", "source": ['helpers.check_exercise("9.1", a)']}, markdown("## 9.3 Core again"),
             markdown("### 9.3.1 Skip (optional)"), markdown("## Exercises")]
    notebook = tmp_path / "99-x.ipynb"
    notebook.write_text(json.dumps({"cells": cells}))
    counted = chapter_times.count(notebook)
    # optional: "## 9.2 Deeper (optional)", "### 9.2.1 Inside it", "### 9.3.1 Skip (optional)": 4 words each
    assert counted["optional prose words"] == 12 and counted["prose words"] == 21
    assert counted["optional exercises"] == 1 and counted["optional code words"] == 2
    assert [heading for heading, _ in counted["sections"]] == ["9.1 Core", "9.2 Deeper", "9.3 Core again", "Exercises"]
