"""Chapter 2 shows `prefill`, `decode_step`, `greedy` and `greedy_generate`: the copies in the notebook must
be the very functions in helpers.course.phases that later sections and chapters run (one home, no drift)."""

import ast
import inspect
import json
from pathlib import Path

import pytest

from helpers.course import phases

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "02-prefill-vs-decode.ipynb"
SHOWN = ("greedy", "prefill", "decode_step", "greedy_generate")


def shown_definitions() -> dict[str, ast.FunctionDef]:
    """Top-level function definitions in the notebook's code cells, by name (the last one wins, as when run)."""
    found = {}
    for cell in json.loads(NOTEBOOK.read_text())["cells"]:
        if cell["cell_type"] == "code":
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.FunctionDef):
                    found[node.name] = node
    return found


def normalised(node: ast.FunctionDef) -> str:
    """The function's syntax tree without positions: comments, quotes and layout do not count."""
    return ast.dump(node, include_attributes=False)


@pytest.mark.parametrize("name", SHOWN)
def test_the_notebook_shows_the_helpers_function(name):
    shown = shown_definitions()
    assert name in shown, f"the chapter-2 notebook no longer defines {name}()"
    helper = ast.parse(inspect.getsource(getattr(phases, name))).body[0]
    assert normalised(shown[name]) == normalised(helper), (
        f"{name}() in notebooks/02-prefill-vs-decode.ipynb differs from helpers/course/phases.py: change both")


def test_the_comparison_sees_a_change():
    helper = ast.parse(inspect.getsource(phases.prefill)).body[0]
    edited = ast.parse(inspect.getsource(phases.prefill).replace("logits_to_keep=1", "logits_to_keep=2")).body[0]
    assert normalised(edited) != normalised(helper)
