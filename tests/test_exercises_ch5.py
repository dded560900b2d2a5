import pytest

from helpers import check_exercise
from helpers.exercises import exercise

RIGHT = {"5.1": 29, "5.2": 9.6, "5.4": 4, "5.6": 7.6}  # worked in the notebook's <details> answers


@pytest.mark.parametrize("exercise_id", sorted(RIGHT))
def test_right_answer_passes_and_wrong_one_fails(exercise_id, capsys):
    check_exercise(exercise_id, RIGHT[exercise_id])
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise(exercise_id, RIGHT[exercise_id] * 1.5 + 1)
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise(exercise_id, None)
    assert capsys.readouterr().out.startswith("Not answered yet")


def test_choice_exercise(capsys):
    check_exercise("5.3", "static")
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("5.3", "chunked")
    assert capsys.readouterr().out.startswith("Not quite")


def test_counts_are_exact():
    # at most 58.3 sequences fit: 57 and 59 are wrong; TP 2 does not fit (81.3 GB > 78.7 GB), 8 is not the smallest
    for exercise_id, wrong in [("5.1", 28), ("5.1", 30), ("5.1", 58), ("5.4", 2), ("5.4", 8)]:
        entry = exercise(exercise_id)
        assert abs(wrong - entry.expected()) > entry.rel_tol * entry.expected()


def test_step_answer_follows_the_batch():
    # the same formula at batch 1 is about half the batch-64 step: KV reads cost about as much as the weights
    entry = exercise("5.2")
    assert entry.expected(batch=1) == pytest.approx(entry.expected() / 2.1, rel=0.05)


def test_step_prediction_follows_the_printed_line(capsys):
    # 3 ms + 6 x 0.5 ms per new token + 6 x 129 KV tokens x 0.1 us = 6.0774 ms
    context = dict(fixed_ms=3.0, per_token_ms=0.5, per_kv_token_us=0.1, batch=6, context=129)
    check_exercise("5.5", 6.0774, **context)
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("5.5", 3.0 + 0.5 + 0.0129, **context)  # batch 1's step: wrong
    assert capsys.readouterr().out.startswith("Not quite")
    with pytest.raises(TypeError):
        check_exercise("5.5", 6.0774, **context, model="gpt2")


def test_moe_answer_is_the_active_weights_not_the_total(capsys):
    # 25.50 GB of matrix weights at batch 1 / 3.35 TB/s = 7.61 ms; all 46.7e9 parameters x 2 bytes would be 27.9 ms
    check_exercise("5.6", 46.7e9 * 2 / 3.35e12 * 1e3)
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise("5.6", 12.88e9 * 2 / 3.35e12 * 1e3)  # active parameters, embedding row included: also right
    assert capsys.readouterr().out.startswith("Correct")
    assert exercise("5.6").expected() == pytest.approx(46.7e9 * 2 / 3.35e12 * 1e3 / 3.66, rel=0.01)
