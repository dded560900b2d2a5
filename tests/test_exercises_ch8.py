"""Chapter 8's exercises: the right answer passes, a wrong one is reported wrong."""

import pandas as pd

import helpers
from helpers.course.step_time import calibration as calib
from helpers.course.step_time import op_profile, work_terms
from helpers.plumbing.device import device_name

SPEC = helpers.model_spec("gpt2-medium")
RATES = (2e10, 4e10, 8e10, 1e11, 1.2e11, 1.2e11, 1.2e11)
# a calibration with round numbers, as if measured on this CPU (no timing)
CAL = calib.Calibration(device_name("cpu"), "cpu", "float32", calib.MATMUL_TOKENS,
                        {"x@W": RATES, "linear": RATES, "lm_head": RATES[:3]}, 2e10, 3e10, 5e9, 8e10,
                        {"gpt2": 1e-5, "llama": 1e-5, "qwen3": 1e-5})


def test_decode_step_by_hand_exercise(capsys):
    """Scaling the context-bound rows of the step at 128 tokens by 3 is the step at 384, to the rounding."""
    terms = pd.DataFrame(work_terms(SPEC, [(1, 128)], CAL)).set_index("group").time_s
    grows = terms[["attention", "cache copies"]].sum()
    by_hand = terms.sum() + 2 * grows
    context = dict(spec=SPEC, context=384, calibration=CAL)
    helpers.check_exercise("8.1", by_hand, **context)
    helpers.check_exercise("8.1", terms.sum(), **context)  # the step at 128 tokens, unchanged
    helpers.check_exercise("8.1", None, **context)
    out = capsys.readouterr().out.splitlines()
    assert grows > 0.05 * by_hand, "the test needs context terms large enough to tell apart"
    assert out[0].startswith("Correct") and out[1].startswith("Not quite") and out[2].startswith("Not answered")


def test_overhead_exercise(capsys):
    xl = helpers.model_spec("gpt2-xl")
    profile = op_profile(xl, "decode")
    right = (profile.ops_fixed + 48 * profile.ops_per_layer) * 20e-6
    helpers.check_exercise("8.2", right, spec=xl, op_overhead_s=20e-6)
    helpers.check_exercise("8.2", 48 * profile.ops_per_layer * 20e-6, spec=xl, op_overhead_s=20e-6)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Correct") and out[1].startswith("Not quite")


def test_growing_term_exercise(capsys):
    helpers.check_exercise("8.3", "b")
    helpers.check_exercise("8.3", "a")
    out = capsys.readouterr().out.splitlines()
    assert out == ["Correct.", "Not quite: look at the measurements above again."]


def test_experts_read_exercise(capsys):
    """The published Qwen3-30B-A3B at batch 8: ~51.6 of 128 experts per layer, not 8 x 8 = 64 nor batch 1's 8."""
    qwen = helpers.model_spec("qwen3-30b-a3b")
    expert_bytes = 3 * 2048 * 768 * 2  # gate, up, down in bf16
    by_hand = 48 * 128 * (1 - (1 - 8 / 128) ** 8) * expert_bytes
    for answer in (by_hand, 48 * 64 * expert_bytes, 48 * 8 * expert_bytes):
        helpers.check_exercise("8.4", answer, spec=qwen, batch=8)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Correct") and out[1].startswith("Not quite") and out[2].startswith("Not quite")
    assert 23e9 < by_hand < 24e9  # the answer's 23 GB
