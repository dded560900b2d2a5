"""`check_exercise` refuses keyword arguments an exercise does not take, instead of grading against defaults."""

import pytest

import helpers
from helpers.exercises import context_keywords, exercise


def test_unknown_keyword_is_named_with_the_allowed_ones():
    with pytest.raises(TypeError, match=r"unknown keyword\(s\) K; exercise 7.1 takes: acceptance_rate, k"):
        helpers.check_exercise("7.1", 1.0, acceptance_rate=0.8, K=4)


def test_exercise_without_context_takes_no_keywords():
    with pytest.raises(TypeError, match="no keyword arguments"):
        helpers.check_exercise("2.1", 3.9, bandwidth=3.35e12)
    with pytest.raises(TypeError, match="takes: no keyword arguments"):
        helpers.check_exercise("8.3", "b", spec=None)


def test_known_keywords_still_grade(capsys):
    helpers.check_exercise("7.3", 4.0, prompt_len=512, prefix_len=384)
    assert capsys.readouterr().out.startswith("Correct")
    assert context_keywords(exercise("6.1")) == ("prompt_len", "output_len", "block_size")
