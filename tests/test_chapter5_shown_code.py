"""Chapter 5 shows the scheduler's step, `schedule` and `postprocess`: the copies in the notebook must be the
very functions in helpers.course.serving.scheduler that the simulator runs (one home, no drift)."""

import ast
import inspect

import pytest
from test_shown_code import normalised, shown_definitions

from helpers.course.serving import scheduler

NOTEBOOK = "05-batching-and-serving.ipynb"
SHOWN = ("schedule", "postprocess")


@pytest.mark.parametrize("name", SHOWN)
def test_the_notebook_shows_the_helpers_function(name):
    shown = shown_definitions(NOTEBOOK)
    assert name in shown, f"the chapter-5 notebook no longer defines {name}()"
    helper = ast.parse(inspect.getsource(getattr(scheduler, name))).body[0]
    assert normalised(shown[name]) == normalised(helper), (
        f"{name}() in notebooks/{NOTEBOOK} differs from helpers/course/serving/scheduler.py: change both")


def test_the_comparison_sees_a_change():
    source = inspect.getsource(scheduler.schedule)
    edited = source.replace("len(running) < limits.max_batch", "len(running) <= limits.max_batch")
    assert edited != source  # the edit took: one admission too many
    assert normalised(ast.parse(edited).body[0]) != normalised(ast.parse(source).body[0])


def test_comments_and_layout_do_not_count():
    source = inspect.getsource(scheduler.postprocess)
    relaid = source.replace("  # a prompt chunk with more to come: no token yet", "").replace("finished = []",
                                                                                                "finished = [ ]")
    assert relaid != source
    assert normalised(ast.parse(relaid).body[0]) == normalised(ast.parse(source).body[0])
