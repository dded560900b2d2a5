"""Chapter 8's exercises: the right answer passes, a wrong one is reported wrong."""

import helpers
from helpers.course.step_time import op_profile

SPEC = helpers.model_spec("gpt2-medium")


def test_memory_floor_exercise(capsys):
    context = dict(spec=SPEC, bytes_per_elem=4, read_bandwidth=1.5e10)
    right = helpers.weight_bytes_read(SPEC, 4) / 1.5e10
    helpers.check_exercise("8.1", right, **context)
    helpers.check_exercise("8.1", 2 * right, **context)
    helpers.check_exercise("8.1", None, **context)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Correct") and out[1].startswith("Not quite") and out[2].startswith("Not answered")


def test_op_count_exercise(capsys):
    right = op_profile(SPEC, "decode").ops(SPEC.n_layers)
    helpers.check_exercise("8.2", right, spec=SPEC)
    helpers.check_exercise("8.2", SPEC.n_layers, spec=SPEC)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Correct") and out[1].startswith("Not quite")


def test_growing_term_exercise(capsys):
    helpers.check_exercise("8.3", "b")
    helpers.check_exercise("8.3", "a")
    out = capsys.readouterr().out.splitlines()
    assert out == ["Correct.", "Not quite: look at the measurements above again."]
