"""Chapters 2, 5, 7 and 8 show the code they teach (prefill and decode; the scheduler's step; the speculative
accept loop; the step model's terms): each copy in a notebook must be the very function in helpers that the
chapters run, compared as syntax trees (one home, no drift)."""

import ast
import inspect
import json
from pathlib import Path

import pytest

from helpers.course import phases
from helpers.course.faster_decode import speculative
from helpers.course.serving.simulator import scheduler
from helpers.course.step_time import calibrated

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
SHOWN = [("02-prefill-vs-decode.ipynb", phases, name)
         for name in ("greedy", "prefill", "decode_step", "greedy_generate")]
SHOWN += [("05-batching-and-serving.ipynb", scheduler, name) for name in ("schedule", "postprocess")]
SHOWN += [("07-faster-decode.ipynb", speculative, "speculative_generate")]
SHOWN += [("08-predict-before-you-run.ipynb", calibrated, name) for name in ("matmul_row", "stream_row", "work_terms")]


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


def tree(source: str) -> str:
    """The normalised tree of the first definition in `source`."""
    return normalised(ast.parse(source).body[0])


@pytest.mark.parametrize(("notebook", "module", "name"), SHOWN)
def test_the_notebook_shows_the_helpers_function(notebook, module, name):
    shown = shown_definitions(notebook)
    assert name in shown, f"{notebook} no longer defines {name}()"
    assert normalised(shown[name]) == tree(inspect.getsource(getattr(module, name))), (
        f"{name}() in notebooks/{notebook} differs from {module.__name__}: change both")


@pytest.mark.parametrize(("function", "old", "new"), [
    (phases.prefill, "logits_to_keep=1", "logits_to_keep=2"),
    (scheduler.schedule, "len(running) < limits.max_batch", "len(running) <= limits.max_batch"),
    (calibrated.work_terms, "cache_bytes(spec, ctx - new, 1, b)", "2 * ctx"),
])
def test_the_comparison_sees_a_change(function, old, new):
    source = inspect.getsource(function)
    assert old in source  # the edit takes
    assert tree(source.replace(old, new)) != tree(source)


def test_comments_and_layout_do_not_count():
    source = inspect.getsource(scheduler.postprocess)
    relaid = source.replace("  # a prompt chunk with more to come: no token yet", "").replace("finished = []",
                                                                                                "finished = [ ]")
    assert relaid != source
    assert tree(relaid) == tree(source)
