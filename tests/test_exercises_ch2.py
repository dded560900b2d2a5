"""Chapter 2's exercises: the right answer is accepted, a wrong one is reported wrong."""

import helpers


def answer_is(capsys, exercise_id, answer):
    helpers.check_exercise(exercise_id, answer)
    return capsys.readouterr().out.startswith("Correct")


def test_llama_2_7b_tpot_on_h100(capsys):
    assert answer_is(capsys, "2.1", 3.95)  # 6.61e9 matrix parameters x 2 B / 3.35 TB/s
    assert not answer_is(capsys, "2.1", 8.0)


def test_long_prompt_request_is_still_mostly_decode(capsys):
    assert answer_is(capsys, "2.2", "decode")
    assert not answer_is(capsys, "2.2", "prefill")


def test_kv_share_of_a_gpt2_step(capsys):
    assert answer_is(capsys, "2.3", 0.132)  # 37.7 MB of KV / (37.7 + 247.3) MB
    assert not answer_is(capsys, "2.3", 0.5)


def test_batch_where_decode_turns_compute_bound(capsys):
    assert answer_is(capsys, "2.4", 295)
    assert not answer_is(capsys, "2.4", 30)


def test_unanswered_is_not_judged(capsys):
    helpers.check_exercise("2.1", None)
    assert capsys.readouterr().out.startswith("Not answered yet")
