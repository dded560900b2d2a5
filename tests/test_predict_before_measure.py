"""Each chapter asks the learner for a number before it measures it, and reconciles the two.

A prediction cell binds `answer = None` (or `answer_<something> = None`) and calls `helpers.check_exercise`. A
later code cell measures (times something, runs the engine or the ranks, or reads a real cache's bytes), and it
or a later cell refers to that answer name beside what was measured. A chapter in NOT_YET (none now) asks its
questions only after the measurement that answers them; the test also fails when one of them starts to comply,
so that the list stays true.
"""

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]-*.ipynb"))
MEASURES = re.compile(r"\b(benchmark|time_alternating|time_once|timed_generate|benchmark_server|interleaved_sweep|"
                      r"time_\w+|cache_nbytes|run_live|run_ranks)\(")
NOT_YET: dict[str, str] = {}  # chapter -> why it does not yet predict before it measures


def predictions_then_measured(cells: list[dict]) -> list[tuple[int, int]]:
    """(prediction cell, reconciling cell) pairs: a measurement after the prediction, then its answer used."""
    code = [(i, "".join(c["source"])) for i, c in enumerate(cells) if c["cell_type"] == "code"]
    pairs = []
    for k, (i, source) in enumerate(code):
        names = re.findall(r"^(answer\w*) = None", source, re.M) if "check_exercise(" in source else []
        names += [alias for name in names for alias in re.findall(rf"^(\w+) = {name}\b", source, re.M)]
        measured = False
        for j, later in code[k + 1:]:
            if "check_exercise(" in later:
                names = [n for n in names if n != "answer"]  # the next exercise rebinds `answer`
            measured = measured or bool(MEASURES.search(later))
            if measured and any(re.search(rf"\b{n}\b", later) for n in names):
                pairs.append((i, j))
                break
    return pairs


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_prediction_comes_before_the_measurement_that_answers_it(notebook):
    pairs = predictions_then_measured(json.loads(notebook.read_text())["cells"])
    chapter = notebook.name[:2]
    if chapter in NOT_YET:
        assert not pairs, f"chapter {chapter} now predicts before measuring (cells {pairs}): drop it from NOT_YET"
    else:
        assert pairs, f"chapter {chapter}: no exercise asks for a number before the cell that measures it"
