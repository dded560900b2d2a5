"""Chapters 7 and 8 show the code they teach (the speculative accept loop, the step model's terms): each copy
in a notebook must be the very function in helpers that the chapters run (one home, no drift)."""

import ast
import inspect
import json
from pathlib import Path

import pytest

from helpers.course.faster_decode import speculative
from helpers.course.step_time import calibrated

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SHOWN = [("07-faster-decode.ipynb", speculative, "speculative_generate"),
         ("08-predict-before-you-run.ipynb", calibrated, "matmul_row"),
         ("08-predict-before-you-run.ipynb", calibrated, "stream_row"),
         ("08-predict-before-you-run.ipynb", calibrated, "work_terms")]


def shown_definitions(notebook: str) -> dict[str, ast.FunctionDef]:
    """Top-level function definitions in a notebook's code cells, by name (the last one wins, as when run)."""
    found = {}
    for cell in json.loads((NOTEBOOKS / notebook).read_text())["cells"]:
        if cell["cell_type"] == "code":
            for node in ast.parse("".join(cell["source"])).body:
                if isinstance(node, ast.FunctionDef):
                    found[node.name] = node
    return found


def normalised(node: ast.FunctionDef) -> str:
    """The function's syntax tree without positions: comments, quotes and layout do not count."""
    return ast.dump(node, include_attributes=False)


@pytest.mark.parametrize(("notebook", "module", "name"), SHOWN)
def test_the_notebook_shows_the_helpers_function(notebook, module, name):
    shown = shown_definitions(notebook)
    assert name in shown, f"{notebook} no longer defines {name}()"
    helper = ast.parse(inspect.getsource(getattr(module, name))).body[0]
    assert normalised(shown[name]) == normalised(helper), (
        f"{name}() in notebooks/{notebook} differs from {module.__name__}: change both")


def test_the_comparison_sees_a_change():
    source = inspect.getsource(calibrated.work_terms)
    helper = ast.parse(source).body[0]
    edited = ast.parse(source.replace("2 * ctx - new", "2 * ctx")).body[0]
    assert normalised(edited) != normalised(helper)
