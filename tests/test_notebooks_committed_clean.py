"""Notebooks are committed without outputs, and each opens with the lab's structure."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_has_no_outputs(path):
    nb = json.loads(path.read_text())
    code = [(i, c) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    dirty = [i for i, c in code if c.get("outputs") or c.get("execution_count")]
    assert not dirty, f"{path.name}: cells {dirty} have outputs or execution counts; clear them before committing"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_structure(path):
    nb = json.loads(path.read_text())
    markdown = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    number = int(path.name[:2])
    assert markdown.lstrip().startswith(f"# {number}. "), f"{path.name} must open with '# {number}. Title'"
    for heading in ("## Overview", "## Prerequisites", "## Summary", "## Exercises", "## What's next", "## Resources"):
        assert heading in markdown, f"{path.name} lacks {heading!r}"
    first_code = next("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "helpers.setup(" in first_code and "pip" in first_code, f"{path.name}: the first code cell must set up"
