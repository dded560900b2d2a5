import pytest

import helpers
from helpers import check_exercise
from helpers.exercises import exercise

RIGHT = {"4.1": 40.0, "4.2": 33, "4.3": 32, "4.4": 8, "4.7": 10.0, "4.8": 5.73}  # worked in the <details> answers


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
    # GPT-2 small in fp32: 73,728 B a token; 150 tokens x batch 3 = 31.64 MiB
    context = dict(kv_bytes_per_token=73_728, tokens=150, batch=3)
    check_exercise("4.5", 31.640625, **context)
    assert capsys.readouterr().out.startswith("Correct")
    check_exercise("4.5", 31.640625 * 12 / 8, **context)  # counted query heads of a 12:8 GQA model: wrong
    assert capsys.readouterr().out.startswith("Not quite")
    check_exercise("4.5", 31.640625, **(context | {"batch": 2}))
    assert capsys.readouterr().out.startswith("Not quite")


def test_the_calculator_bug_is_graded_wrong(capsys):
    # exercise 4.7: Llama-3-70B at 32k with query heads (64) instead of KV heads (8) is 80 GiB, not 10
    spec = helpers.model_spec("llama-3-70b")
    buggy = 2 * 2 * spec.n_layers * spec.n_heads * spec.head_dim * 32_768 / 2**30
    assert buggy == 80.0
    check_exercise("4.7", buggy)
    assert capsys.readouterr().out.startswith("Not quite")
    assert exercise("4.7").expected() == helpers.cache_bytes(spec, 32_768) / 2**30 == 10.0


def test_the_window_saving_counts_full_and_sliding_layers(capsys):
    # exercise 4.8: Gemma-3-27B has 10 full and 52 sliding layers (window 1,024): at 64k, all-full is 5.7x larger
    ratio = exercise("4.8").expected()
    assert 62 * 65_536 / (10 * 65_536 + 52 * 1023) == pytest.approx(ratio)
    for wrong in (6.0, 62 / 10, 1.0):  # "one sixth", the layer ratio, no saving
        check_exercise("4.8", wrong)
        assert capsys.readouterr().out.startswith("Not quite")
    check_exercise("4.8", 62 * 65_536 / (10 * 65_536 + 52 * 1024))  # a whole window of 1,024: right too
    assert capsys.readouterr().out.startswith("Correct")
