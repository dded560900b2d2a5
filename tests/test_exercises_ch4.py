import pytest

from helpers import check_exercise
from helpers.exercises import exercise

RIGHT = {"4.1": 40.0, "4.2": 64, "4.3": 129, "4.4": 8}  # worked in the notebook's <details> answers


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_right_answer_passes_and_wrong_one_fails(exercise_id, capsys):
    check_exercise(exercise_id, RIGHT[exercise_id])
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise(exercise_id, RIGHT[exercise_id] * 1.5 + 1)
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise(exercise_id, None)
    assert capsys.readouterr().out.startswith("Not answered yet")


def test_batch_answers_are_exact_counts():
    # 64.69 and 129.38 sequences fit in the 81,559 MiB the driver reports: 65 (80 GiB read as the card's size)
    # and 63 must be wrong, a whole sequence counts
    for exercise_id, wrong in [("4.2", 63), ("4.2", 65), ("4.3", 130)]:
        entry = exercise(exercise_id)
        assert abs(wrong - entry.expected()) > entry.rel_tol * entry.expected()
