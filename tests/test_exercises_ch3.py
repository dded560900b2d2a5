"""Chapter 3's exercises: the worked answers in the notebook's <details> pass, wrong ones are told so."""

import pytest

from helpers.exercises import check_exercise

RIGHT = [("3.1", 64.0, {}), ("3.2", 3072, {}), ("3.3", 4.63, {"n": 256}), ("3.3", 13.37, {"n": 16384}),
         ("3.4", 142.4, {}), ("3.5", 48.0, {"seconds": 0.003, "factor": 4})]  # 3 ms x 4^2


@pytest.mark.parametrize(("exercise_id", "answer", "context"), RIGHT)
def test_the_worked_answer_is_right(capsys, exercise_id, answer, context):
    check_exercise(exercise_id, answer, **context)
    assert capsys.readouterr().out.startswith("Correct")


@pytest.mark.parametrize(("exercise_id", "answer", "context"), RIGHT)
def test_a_wrong_answer_is_reported(capsys, exercise_id, answer, context):
    check_exercise(exercise_id, answer * 1.5, **context)
    assert capsys.readouterr().out.startswith("Not quite")


def test_no_answer_yet(capsys):
    check_exercise("3.1", None)
    assert "Not answered yet" in capsys.readouterr().out
