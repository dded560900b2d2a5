"""Chapter 7's exercises: the right answer passes, a wrong one is reported wrong, None is not answered."""

import helpers
from helpers.course.faster_decode import small_llama_spec


def answers(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_tokens_per_verification_exercise(capsys):
    right = (1 - 0.7**4) / (1 - 0.7)
    for answer in (right, 3 + 1, None):
        helpers.check_exercise("7.1", answer, acceptance_rate=0.7, k=3)
    out = answers(capsys)
    assert out[0].startswith("Correct") and out[1].startswith("Not quite") and out[2].startswith("Not answered")


def test_int8_bytes_exercise(capsys):
    spec = small_llama_spec(2)
    helpers.check_exercise("7.2", helpers.weight_bytes_read(spec, 1), spec=spec)
    helpers.check_exercise("7.2", helpers.weight_bytes_read(spec, 4), spec=spec)
    out = answers(capsys)
    assert out[0].startswith("Correct") and out[1].startswith("Not quite")


def test_prefix_speedup_exercise(capsys):
    helpers.check_exercise("7.3", 4.0, prompt_len=512, prefix_len=384)
    helpers.check_exercise("7.3", 512 / 384, prompt_len=512, prefix_len=384)
    out = answers(capsys)
    assert out[0].startswith("Correct") and out[1].startswith("Not quite")


def test_batch_exercise(capsys):
    helpers.check_exercise("7.4", "b")
    helpers.check_exercise("7.4", "a")
    assert answers(capsys) == ["Correct.", "Not quite: look at the measurements above again."]


def test_predicted_speculative_speedup_exercise(capsys):
    times = dict(prefill_s=0.020, step_s=0.010, verify_s=0.015, new_tokens=17)
    tokens = (1 - 0.75**5) / (1 - 0.75)
    right = (0.020 + 16 * 0.010) / (0.020 + 16 / tokens * 0.015)
    helpers.check_exercise("7.5", right, acceptance_rate=0.75, k=4, **times)
    helpers.check_exercise("7.5", tokens / 1.5, acceptance_rate=0.75, k=4, **times)  # prefill left out
    helpers.check_exercise("7.5", None, acceptance_rate=0.75, k=4, **times)
    out = answers(capsys)
    assert out[0].startswith("Correct") and out[1].startswith("Not quite") and out[2].startswith("Not answered")
