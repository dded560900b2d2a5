import numpy as np
import pandas as pd
import pytest

import helpers


def test_matmul_flops_bytes_intensity():
    assert helpers.matmul_flops(2, 3, 4) == 48
    assert helpers.matmul_bytes(2, 3, 4, 2) == 2 * (6 + 12 + 8)
    assert helpers.arithmetic_intensity(100, 4) == 25
    with pytest.raises(ValueError, match="k must be an integer >= 1"):
        helpers.matmul_flops(2, 0, 4)
    with pytest.raises(ValueError, match="nbytes"):
        helpers.arithmetic_intensity(1, 0)


def test_decode_matmul_intensity_is_about_the_batch():
    d, f = 4096, 4096
    for batch in (1, 8, 64):
        flops, nbytes = helpers.matmul_flops(batch, d, f), helpers.matmul_bytes(batch, d, f, 2)
        intensity = helpers.arithmetic_intensity(flops, nbytes)
        assert batch * 0.9 < intensity < batch * 1.01


def test_roofline_time_is_the_slower_bound():
    assert helpers.roofline_time(1e12, 1e9, peak_flops=1e12, bandwidth=1e12) == 1.0
    assert helpers.roofline_time(1e9, 1e12, peak_flops=1e12, bandwidth=1e12) == 1.0
    with pytest.raises(ValueError, match="bandwidth"):
        helpers.roofline_time(1, 1, 1, 0)


def test_forward_flops_about_twice_params_per_token():
    spec = helpers.model_spec("llama-2-7b")
    per_token = helpers.forward_flops(spec, 1, 1)
    assert 0.98 * 2 * spec.n_params < per_token < 2 * spec.n_params
    assert helpers.attention_flops(spec, 10, 100, causal=False) == 4 * 32 * 4096 * 10 * 100
    assert helpers.attention_flops(spec, 10, 100) == 4 * 32 * 4096 * (91 + 100) * 10 // 2  # keys 91..100 seen
    gpt2 = helpers.model_spec("gpt2")
    assert helpers.matmul_params(gpt2) == gpt2.n_params - 1024 * 768


def test_forward_flops_with_the_lm_head_on_the_last_position_only():
    gpt2 = helpers.model_spec("gpt2")
    every, last = helpers.forward_flops(gpt2, 100), helpers.forward_flops(gpt2, 100, logits_positions=1)
    assert every - last == 2 * 50257 * 768 * 99  # the tied LM head runs on 99 fewer positions
    assert helpers.forward_flops(gpt2, 1, 50, logits_positions=1) == helpers.forward_flops(gpt2, 1, 50)
    with pytest.raises(ValueError, match="logits_positions"):
        helpers.forward_flops(gpt2, 4, logits_positions=5)
    with pytest.raises(ValueError, match="logits_positions"):
        helpers.forward_flops(gpt2, 4, logits_positions=0)


def test_check_passes_and_fails(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))  # its false claim stays out of the run's own check log
    helpers.check(True, "a claim", "some evidence")
    assert "✓ a claim" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="Self-check failed: wrong claim") as failed:
        helpers.check(False, "wrong claim", "evidence")
    assert "run the cell again" in str(failed.value)  # what a learner on a busy laptop can try
    assert [e["outcome"] for e in helpers.read_check_log(tmp_path / "checks.jsonl")] == ["pass", "fail"]


def test_check_model_is_labelled_as_the_course_arithmetic(capsys):
    helpers.check_model(True, "a formula", "its inputs")
    assert "✓ (model) a formula" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="Model check failed: wrong formula"):
        helpers.check_model(False, "wrong formula", "evidence")


def test_check_answer_and_choice(capsys):
    helpers.check_answer(None, 1.0)
    helpers.check_answer(1.02, 1.0)
    helpers.check_answer(2.0, 1.0)
    helpers.check_choice("memory", "memory", ("memory", "compute"))
    out = capsys.readouterr().out
    assert "Not answered yet" in out and "Correct" in out and "too high" in out
    with pytest.raises(ValueError, match="answer must be one of"):
        helpers.check_choice("disk", "memory", ("memory", "compute"))


def test_your_answer_sets_the_learners_number_beside_the_measurement():
    assert helpers.your_answer(None, "9.3", 10.0) == "no answer given to exercise 9.3"
    assert helpers.your_answer(11.0, "9.3", 10.0, unit="ms", digits=1) == "yours 11.0 ms (error +10%)"
    assert helpers.your_answer(4, "5.4", np.int64(8), digits=0) == "yours 4 (error -50%)"  # a pandas index's min
    assert helpers.your_answer("chunked", "5.3", "static") == "yours: chunked (found: static)"


def test_save_results_tags_and_load_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    path = helpers.save_results(pd.DataFrame({"n": [1, 2], "seconds": [0.1, 0.2]}), "02-prefill", "ttft", "cpu")
    saved = pd.read_csv(path)
    assert {"device", "profile", "torch", "transformers", "date"} <= set(saved.columns)
    assert str(tmp_path) in str(path)
    with pytest.raises(ValueError, match="empty"):
        helpers.save_results(pd.DataFrame(), "02-prefill", "ttft")
    reference_dir = tmp_path / "reference" / "some-gpu"
    reference_dir.mkdir(parents=True)
    saved.to_csv(reference_dir / "02-prefill--ttft.csv", index=False)
    monkeypatch.setattr(helpers.plumbing.results, "REFERENCE_DIR", tmp_path / "reference")
    assert len(helpers.load_reference("02-prefill", "ttft")) == 2
    assert helpers.load_reference("02-prefill", "nothing").empty
    _, (ax,) = helpers.new_figure()
    assert helpers.plot_reference(ax, "02-prefill", "ttft", "n", "seconds") == 1
    assert any("reference:" in line.get_label() for line in ax.get_lines())
    assert helpers.plot_reference(ax, "02-prefill", "nothing", "n", "seconds") == 0


def test_plot_roofline_draws_points():
    points = pd.DataFrame({"intensity": [0.5, 100], "flops_per_s": [1e9, 1e11], "label": ["matvec", "matmul"]})
    ax = helpers.plot_roofline(1e11, 1e10, points=points)
    assert ax.get_xscale() == "log" and "FLOP" in ax.get_xlabel()
    assert len(ax.get_lines()) >= 4  # roof, ridge line, two point groups


def test_prediction_errors_are_predicted_over_measured_minus_one_and_name_a_missing_column():
    table = pd.DataFrame({"n": [1, 2], "measured_s": [2.0, 4.0], "roof_s": [1.0, 4.0], "cal_s": [3.0, 5.0]})
    errors = helpers.prediction_errors(table, "measured_s", {"roofline": "roof_s", "calibrated": "cal_s"}, "n")
    assert list(errors.columns) == ["n", "measured_s", "roofline", "roofline_error", "calibrated", "calibrated_error"]
    assert errors["roofline_error"].tolist() == [-0.5, 0.0]
    assert errors["calibrated_error"].tolist() == [0.5, 0.25]
    with pytest.raises(ValueError, match="'nope'"):
        helpers.prediction_errors(table, "measured_s", {"x": "nope"}, "n")


def test_error_lean_names_the_lean_past_its_band():
    assert "low almost everywhere" in helpers.error_lean(pd.Series([-0.3, -0.2, -0.15, -0.4, 0.01]))
    assert "high almost everywhere" in helpers.error_lean(pd.Series([0.3, 0.2, 0.5, 0.12]))
    mixed = helpers.error_lean(pd.Series([-0.3, 0.2, 0.05, -0.01]))
    assert "no lean past 10%" in mixed and mixed.startswith("1 low, 1 high of 4 by over 10%")
    # misses inside the band are noise, however they lean
    assert "no lean" in helpers.error_lean(pd.Series([-0.05, -0.08, -0.02]))
    assert "low almost everywhere" in helpers.error_lean(pd.Series([-0.05, -0.08, -0.02]), band=0.0)
    # below zero on all but one, the median past the band: a lean, though one miss stays inside the band
    assert "low almost everywhere" in helpers.error_lean(pd.Series([-0.17, -0.2, -0.05, -0.3, -0.12]))
    assert "high almost everywhere" in helpers.error_lean(pd.Series([0.05, 0.12, 0.2, 0.15, 0.26, -0.02]))
    # far off both ways (a line pulled up at one end): a wrong shape, not noise
    shape = helpers.error_lean(pd.Series([-0.42, -0.43, -0.12, 0.27, 0.45, 1.26, -0.02]))
    assert "the shape is wrong" in shape
    # most rows low but not 4 in 5, the median well past the band: not noise either
    assert "some rows lean" in helpers.error_lean(pd.Series([-0.3, -0.25, -0.2, -0.2, 0.05, 0.15, -0.02]))


def test_error_lean_rejects_bad_arguments():
    with pytest.raises(ValueError, match="band"):
        helpers.error_lean(pd.Series([0.1]), band=1.5)
    with pytest.raises(ValueError, match="most"):
        helpers.error_lean(pd.Series([0.1]), most=0.4)
    with pytest.raises(ValueError, match="no value"):
        helpers.error_lean(pd.Series([float("nan")]))
