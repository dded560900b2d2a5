import pytest

from helpers import check_exercise
from helpers.exercises import exercise

RIGHT = {"4.1": 40.0, "4.2": 65, "4.3": 130, "4.4": 8}  # worked in the notebook's <details> answers


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_right_answer_passes_and_wrong_one_fails(exercise_id, capsys):
    check_exercise(exercise_id, RIGHT[exercise_id])
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise(exercise_id, RIGHT[exercise_id] * 1.5 + 1)
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise(exercise_id, None)
    assert capsys.readouterr().out.startswith("Not answered yet")


def test_batch_answers_are_exact_counts():
    # 65.04 and 130.08 sequences fit: 64 or 66 (131) must be wrong, a whole sequence counts
    for exercise_id, wrong in [("4.2", 64), ("4.2", 66), ("4.3", 131)]:
        entry = exercise(exercise_id)
        assert abs(wrong - entry.expected()) > entry.rel_tol * entry.expected()
