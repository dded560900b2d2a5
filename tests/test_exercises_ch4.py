import pytest

from helpers import check_exercise
from helpers.exercises import exercise

RIGHT = {"4.1": 40.0, "4.2": 33, "4.3": 32, "4.4": 8}  # worked in the notebook's <details> answers


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_right_answer_passes_and_wrong_one_fails(exercise_id, capsys):
    check_exercise(exercise_id, RIGHT[exercise_id])
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise(exercise_id, RIGHT[exercise_id] * 1.5 + 1)
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise(exercise_id, None)
    assert capsys.readouterr().out.startswith("Not answered yet")


def test_batch_answers_are_exact_counts():
    # 33.7 and 32.5 sequences fit in the A100's 81,920 MiB: rounding up or one short is wrong,
    # a whole sequence counts
    for exercise_id, wrong in [("4.2", 32), ("4.2", 34), ("4.3", 33), ("4.3", 31)]:
        entry = exercise(exercise_id)
        assert abs(wrong - entry.expected()) > entry.rel_tol * entry.expected()


def test_cache_prediction_follows_the_printed_bytes(capsys):
    # GPT-2 small in fp32: 73,728 B a token; 200 tokens x batch 4 = 56.25 MiB
    context = dict(kv_bytes_per_token=73_728, tokens=200, batch=4)
    check_exercise("4.5", 56.25, **context)
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("4.5", 56.25 * 12 / 8, **context)  # counted query heads of a 12:8 GQA model: wrong
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise("4.5", 56.25, **(context | {"batch": 2}))
    assert capsys.readouterr().out.startswith("Not quite")
