"""Chapter 2's exercises: the right answer is accepted, a wrong one is reported wrong."""

from dataclasses import replace

import helpers
from helpers.course.step_time import calibration as calib
from helpers.course.step_time.operators import op_profile
from helpers.plumbing.device import device_name


def answer_is(capsys, exercise_id, answer):
    helpers.check_exercise(exercise_id, answer)
    return capsys.readouterr().out.startswith("Correct")


def test_llama_2_7b_tpot_on_h100(capsys):
    assert answer_is(capsys, "2.1", 3.95)  # 6.61e9 matrix parameters x 2 B / 3.35 TB/s
    assert not answer_is(capsys, "2.1", 8.0)


def test_prompt_over_ridge_times_the_output_is_mostly_prefill(capsys):
    assert answer_is(capsys, "2.2", "prefill")  # 8,000 in, 40 out on an A100: 0.47 s prefill, 0.31 s decode
    assert not answer_is(capsys, "2.2", "decode")


def test_kv_share_of_a_gpt2_step(capsys):
    assert answer_is(capsys, "2.3", 0.132)  # 37.7 MB of KV / (37.7 + 247.3) MB
    assert not answer_is(capsys, "2.3", 0.5)


def test_batch_where_decode_turns_compute_bound(capsys):
    assert answer_is(capsys, "2.4", 403)  # the L4: 121e12 / 300e9
    assert not answer_is(capsys, "2.4", 295)  # the H100's ridge, not the L4's


def test_unanswered_is_not_judged(capsys):
    helpers.check_exercise("2.1", None)
    assert capsys.readouterr().out.startswith("Not answered yet")


def round_calibration() -> calib.Calibration:
    """A calibration of this CPU with round numbers, as if measured."""
    rates = (2e9, 8e9, 3e10, 8e10, 1e11, 1.2e11, 1.2e11)
    return calib.Calibration(device_name("cpu"), "cpu", "float32", calib.MATMUL_TOKENS,
                             {"x@W": rates, "linear": rates, "lm_head": rates[:3]}, 1e10, 3e10, 2e10, 8e10,
                             {"gpt2": 1e-5})


def test_a_decode_step_worked_by_hand(capsys):
    cal, spec, context = round_calibration(), helpers.model_spec("gpt2"), 1000
    profile = op_profile(spec, "decode")
    head = spec.vocab_size * spec.d_model
    kv = spec.kv_bytes_per_token(4)
    elementwise = profile.elementwise_bytes_per_token_layer * spec.n_layers + profile.elementwise_bytes_per_token_fixed
    attention_flops = spec.n_layers * 4 * spec.n_heads * spec.head_dim * context
    device = (2 * (helpers.matmul_params(spec) - head) / 2e9 + 2 * head / 2e9  # weights at the 1-row rate
              + max(attention_flops / 8e10, kv * context / 2e10)  # attention: its FLOPs or its KV reads
              + kv * (2 * context - 1) / 2e10  # torch.cat reads the old cache and writes the new one
              + elementwise / 3e10)
    host = profile.ops(spec.n_layers) * 1e-5  # operator calls x the cost of one
    by_hand = device + host
    helpers.check_exercise("2.5", by_hand * 1e3, model="gpt2", context=context, calibration=cal)
    assert capsys.readouterr().out.startswith("Correct")
    helpers.check_exercise("2.5", by_hand * 1e3 * 1.3, model="gpt2", context=context, calibration=cal)
    assert capsys.readouterr().out.startswith("Not quite")
    slow_host = replace(cal, overlap=True, op_overhead_s={"gpt2": 1e-3})  # a GPU's queue overlaps the host
    overlapped = max(device, host * 100)
    helpers.check_exercise("2.5", overlapped * 1e3, model="gpt2", context=context, calibration=slow_host)
    assert capsys.readouterr().out.startswith("Correct")
    helpers.check_exercise("2.5", (device + host * 100) * 1e3, model="gpt2", context=context, calibration=slow_host)
    assert capsys.readouterr().out.startswith("Not quite")
