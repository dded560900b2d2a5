"""Chapter 1's exercises: the right answer is accepted, a wrong one is reported wrong."""

import helpers


def answer_is(capsys, exercise_id, answer):
    helpers.check_exercise(exercise_id, answer)
    return capsys.readouterr().out.startswith("Correct")


def test_intensity_of_32_tokens(capsys):
    assert answer_is(capsys, "1.1", 31.7)
    assert not answer_is(capsys, "1.1", 32 * 2)


def test_batch_for_llama_70b_on_a100(capsys):
    assert answer_is(capsys, "1.2", 157)
    assert not answer_is(capsys, "1.2", 295)


def test_tiny_matmul_is_overhead(capsys):
    assert answer_is(capsys, "1.3", "overhead")
    assert not answer_is(capsys, "1.3", "cache")


def test_training_flops_per_token(capsys):
    assert answer_is(capsys, "1.4", 7.4e8)
    assert not answer_is(capsys, "1.4", 2.5e8)


def test_matvec_time_from_the_read_ceiling(capsys):
    # GPT-2 large's 1280 x 5120 weight in fp32, with its in and out vectors: 26.24e6 bytes at 20 GB/s, 1.31 ms
    context = {"d_in": 1280, "d_out": 5120, "bytes_per_elem": 4, "bandwidth": 20e9}
    helpers.check_exercise("1.5", 1.31, **context)
    assert capsys.readouterr().out.startswith("Correct")
    helpers.check_exercise("1.5", 0.66, **context)  # bf16's bytes, not fp32's
    assert capsys.readouterr().out.startswith("Not quite")
