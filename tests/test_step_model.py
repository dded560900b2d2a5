"""The calibrated step model (chapter 8): validation, monotonicity, GQA vs MHA, dtypes, device refusal, caching.

Calibrations here are made by hand (no timing); only the op profiles build small random models."""

from dataclasses import replace

import pytest
import torch

import helpers
from helpers.course.step_time import (
    CalibratedStepCost,
    predict_step_time,
    spec_calibration,
    spec_sheet_time,
    step_time_breakdown,
)
from helpers.course.step_time import calibration as calib
from helpers.plumbing.device import device_name

GPT2 = helpers.model_spec("gpt2")


def fake_calibration(dtype: str = "float32", **changes) -> calib.Calibration:
    """A calibration of this CPU with round numbers, as if measured."""
    rates = (2e9, 4e9, 8e9, 1.6e10, 3e10, 8e10, 1e11, 1.2e11, 1.2e11)  # one per MATMUL_TOKENS row
    base = calib.Calibration(device_name("cpu"), "cpu", dtype, calib.MATMUL_TOKENS,
                             {"x@W": rates, "linear": rates, "lm_head": rates[:3]}, 1e10, 3e10, 2e10, 8e10,
                             {"gpt2": 1e-5, "llama": 1e-5, "qwen3": 1e-5})
    return replace(base, **changes)


CAL = fake_calibration()


@pytest.mark.parametrize("kwargs, argument", [
    (dict(n_new_tokens=0, context=8), "n_new_tokens"),
    (dict(n_new_tokens=8, context=4), "context"),
    (dict(n_new_tokens=1, context=8, batch_size=0), "batch_size"),
    (dict(n_new_tokens=1, context=5000), "context"),
])
def test_bad_step_names_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        predict_step_time(GPT2, calibration=CAL, **kwargs)


def test_unknown_dtype_is_refused():
    with pytest.raises(ValueError, match="dtype"):
        predict_step_time(GPT2, 1, 8, calibration=CAL, dtype=torch.int8)


def test_dtype_must_match_the_calibration():
    with pytest.raises(ValueError, match="calibrate"):
        predict_step_time(GPT2, 1, 8, calibration=CAL, dtype=torch.bfloat16)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_every_dtype_predicts_and_half_types_move_half_the_bytes(dtype):
    cal = fake_calibration(dtype)
    table = step_time_breakdown(GPT2, 1, 64, 1, cal, dtype=getattr(torch, dtype))
    full = step_time_breakdown(GPT2, 1, 64, 1, CAL)
    ratio = table["bytes"].sum() / full["bytes"].sum()
    assert ratio == pytest.approx(1.0 if dtype == "float32" else 0.5, rel=0.01)
    assert predict_step_time(GPT2, 1, 64, 1, cal) > 0


def test_predictions_grow_with_tokens_context_and_batch():
    decode = [predict_step_time(GPT2, 1, c, 1, CAL) for c in (16, 256, 1024)]
    prefill = [predict_step_time(GPT2, n, n, 1, CAL) for n in (16, 128, 512)]
    batch = [predict_step_time(GPT2, 1, 256, b, CAL) for b in (1, 4, 16)]
    for series in (decode, prefill, batch):
        assert series == sorted(series) and series[0] < series[-1]
    assert prefill[-1] > decode[-1]  # 512 new tokens cost more than one


def test_gqa_reads_less_cache_than_mha():
    qwen = helpers.model_spec("qwen3-0.6b")
    mha = replace(qwen, n_kv_heads=qwen.n_heads)
    gqa_rows = step_time_breakdown(qwen, 1, 4096, 8, CAL).set_index("group")
    mha_rows = step_time_breakdown(mha, 1, 4096, 8, CAL).set_index("group")
    ratio = mha_rows.loc["cache copies", "bytes"] / gqa_rows.loc["cache copies", "bytes"]
    assert ratio == pytest.approx(qwen.n_heads / qwen.n_kv_heads)
    assert predict_step_time(qwen, 1, 4096, 8, CAL) < predict_step_time(mha, 1, 4096, 8, CAL)


def test_breakdown_counts_the_weights_and_the_last_position_lm_head():
    table = step_time_breakdown(GPT2, 100, 100, 2, CAL).set_index("group")
    weights = table.loc["matmuls", "bytes"] + table.loc["lm_head (last position)", "bytes"]
    assert weights == helpers.weight_bytes_read(GPT2, 4)
    assert table.loc["lm_head (last position)", "flops"] == 2 * 2 * GPT2.vocab_size * GPT2.d_model  # batch 2
    assert table["time_s"].sum() == pytest.approx(predict_step_time(GPT2, 100, 100, 2, CAL))


def test_another_devices_calibration_is_refused():
    other = fake_calibration(device="Some Other CPU (64 threads)")
    with pytest.raises(ValueError, match="measured on 'Some Other CPU"):
        predict_step_time(GPT2, 1, 8, calibration=other)


def test_spec_calibration_predicts_a_gpu_not_measured_here():
    gpu, llama = helpers.gpu_spec("H100 SXM"), helpers.model_spec("llama-3-8b")
    floor = helpers.weight_bytes_read(llama, 2) / gpu.bandwidth
    fast_host = spec_calibration(gpu, replace(CAL, op_overhead_s={"llama": 1e-9}), "bfloat16")
    assert fast_host.source == "spec" and fast_host.overlap
    step = predict_step_time(llama, 1, 1024, 1, fast_host)
    assert floor < step < 1.5 * floor  # memory-bound at batch 1: near the weights' streaming time
    assert spec_sheet_time(llama, 1, 1024, 1, gpu.peak_flops, gpu.bandwidth, 2) <= step
    slow_host = spec_calibration(gpu, CAL, "bfloat16")  # 10 us per op: thousands of ops outlast the weights
    table = step_time_breakdown(llama, 1, 1024, 1, slow_host)
    assert table["overhead_s"].sum() > floor
    assert predict_step_time(llama, 1, 1024, 1, slow_host) == pytest.approx(table["overhead_s"].sum())


def test_calibrate_caches_per_device_and_refresh_measures_again(tmp_path, monkeypatch):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    calls = []
    monkeypatch.setattr(calib, "measure_calibration", lambda device, dtype: calls.append(1) or CAL)
    monkeypatch.setattr(calib, "speed_now", lambda calibration, device, tokens=1: 1.0)  # as fast as calibrated
    monkeypatch.setattr(calib, "overhead_now", lambda calibration, device: 1.0)
    first = calib.calibrate("cpu")
    again = calib.calibrate("cpu")
    assert first == again == replace(CAL, contention=first.contention) and len(calls) == 1
    assert "others_share" in first.contention  # what else ran while it was measured, kept with it
    calib.calibrate("cpu", refresh=True)
    assert len(calls) == 2
    monkeypatch.setattr(calib, "speed_now", lambda calibration, device, tokens=1: 0.5)  # slower since: measure again
    calib.calibrate("cpu")
    assert len(calls) == 3
    monkeypatch.setattr(calib, "speed_now", lambda calibration, device, tokens=1: 1.0)
    monkeypatch.setattr(calib, "overhead_now", lambda calibration, device: 0.5)  # calls cost twice as much now
    calib.calibrate("cpu")
    assert len(calls) == 4


def test_speed_now_re_times_the_one_token_probe():
    impossible = fake_calibration(matmul_flops={"x@W": CAL.matmul_flops["x@W"], "linear": (1e15,) * 7,
                                                "lm_head": CAL.matmul_flops["lm_head"]})
    assert 0 < calib.speed_now(impossible, torch.device("cpu")) < calib.DRIFT[0]  # no CPU streams at 1e15 FLOP/s
    # at 256 rows (the 7th of the table's rows), a probe that computes
    assert 0 < calib.speed_now(impossible, torch.device("cpu"), tokens=256) < calib.DRIFT[0]
    with pytest.raises(ValueError, match="tokens must be one of"):
        calib.speed_now(impossible, torch.device("cpu"), tokens=3)


def test_cache_now_re_times_the_decode_cache_step():
    assert calib.cache_now(CAL, torch.device("cpu")) == 1.0  # no cache-step timing held: nothing to compare
    impossible = fake_calibration(measured={"decode cache step, context 1024": 1e-9})  # a nanosecond step
    assert 0 < calib.cache_now(impossible, torch.device("cpu")) < calib.DRIFT[0]


def test_overhead_now_re_times_an_operator_call():
    impossible = fake_calibration(op_overhead_s={"gpt2": 1e-12})  # no CPU dispatches a call in a picosecond
    assert 0 < calib.overhead_now(impossible, torch.device("cpu")) < calib.DRIFT[0]


def test_calibration_drift_makes_a_check_undecided_once_the_machine_moved(monkeypatch):
    monkeypatch.setattr(calib, "speed_now", lambda calibration, device, tokens=1: {1: 1.1, 256: 0.9}[tokens])
    monkeypatch.setattr(calib, "overhead_now", lambda calibration, device: 1.0)
    assert not calib.calibration_drift(CAL, "cpu", tokens=(1, 256)).busy  # 1.1 / 0.9 - 1 = 22%: within 25%
    monkeypatch.setattr(calib, "overhead_now", lambda calibration, device: 0.25)  # a call costs 4x what it did
    moved = calib.calibration_drift(CAL, "cpu")
    assert moved.speed_moved == pytest.approx(1.1 / 0.25 - 1) and moved.busy
    assert not calib.calibration_drift(CAL, "cpu", overhead=False).busy  # a matmul's check leaves calls out


def test_a_rate_from_noisy_timings_stays_positive():
    from helpers.course.step_time.probes import per_unit_rate

    assert per_unit_rate([1.0, 3.0], [2.0, 4.0]) == pytest.approx(1.0)  # 1 s per unit past a 1 s fixed part
    assert per_unit_rate([1.0, 3.0], [4.0, 2.0]) == pytest.approx(1.5)  # the larger size ran faster: its own rate


def test_a_cached_file_of_another_device_is_refused(tmp_path, monkeypatch):
    import json
    from dataclasses import asdict

    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    path = calib.calibration_path(torch.device("cpu"), torch.float32)
    path.write_text(json.dumps(asdict(fake_calibration(device="elsewhere"))))
    with pytest.raises(ValueError, match="elsewhere"):
        calib.load_calibration(path, torch.device("cpu"))


def test_simulator_step_cost_matches_a_uniform_batch_and_shares_the_weights():
    cost = CalibratedStepCost(GPT2, CAL)
    assert cost([(1, 100)] * 4) == pytest.approx(predict_step_time(GPT2, 1, 100, 4, CAL))
    assert cost([]) == 0.0
    mixed = cost([(64, 64), (1, 300)])  # a chunked-prefill step: one prompt and one decode together
    assert mixed < predict_step_time(GPT2, 64, 64, 1, CAL) + predict_step_time(GPT2, 1, 300, 1, CAL)


def test_an_moe_step_reads_the_experts_its_batch_routes_to():
    moe = helpers.model_spec("mini-qwen3-moe")
    for batch in (1, 4, 64):
        table = step_time_breakdown(moe, 1, 64, batch, CAL).set_index("group")
        weights = table.loc[[g for g in table.index if g.startswith(("matmuls", "experts", "lm_head"))], "bytes"]
        assert weights.sum() == pytest.approx(helpers.weight_bytes_read(moe, 4, batch), rel=1e-6)
    one, many = (helpers.weight_bytes_read(moe, 4, b) for b in (1, 10_000))
    assert one < many == pytest.approx(helpers.weight_bytes_read(moe, 4), rel=1e-6)


def test_grouped_experts_cost_every_expert_walked_and_each_one_hit():
    moe = helpers.model_spec("mini-qwen3-moe")
    cal = replace(CAL, expert_walk_s=1e-6, expert_call_s=3e-6)
    row = step_time_breakdown(moe, 1, 64, 1, cal).set_index("group").loc["expert dispatch"]
    hit = moe.experts_per_token  # one token hits exactly k experts
    assert row["time_s"] == pytest.approx(2 * moe.n_moe_layers * (moe.n_experts * 1e-6 + hit * 3e-6))
    assert "expert dispatch" not in set(step_time_breakdown(GPT2, 1, 64, 1, cal)["group"])


def test_latent_attention_expands_its_cache_every_step():
    mla = helpers.model_spec("mini-deepseek-v3")
    short, long = (step_time_breakdown(mla, 1, n, 1, CAL).set_index("group") for n in (100, 200))
    assert long.loc["latent expansion", "flops"] == 2 * short.loc["latent expansion", "flops"]
    expanded = mla.n_layers * mla.n_heads * (mla.head_dim + mla.v_head_dim) * 4 * 200  # K and V, fp32
    assert long.loc["expanded K/V writes", "bytes"] == expanded
    assert long.loc["attention", "bytes"] == expanded


def test_a_sliding_layer_reads_at_most_its_window():
    gemma = helpers.model_spec("mini-gemma3")
    full = replace(gemma, layer_types=())
    at = {n: step_time_breakdown(gemma, 1, n, 1, CAL).set_index("group").loc["attention", "bytes"]
          for n in (1000, 2000)}
    per_token_full_layer = 2 * gemma.n_kv_heads * gemma.head_dim * 4
    assert at[2000] - at[1000] == 1000 * per_token_full_layer  # only the one full layer grows
    assert predict_step_time(gemma, 1, 2000, 1, CAL) < predict_step_time(full, 1, 2000, 1, CAL)


def test_cache_copies_past_the_allocators_threshold_pay_for_fresh_pages():
    """Arithmetic: a decode step whose batched K (and V) of a layer reaches the threshold pays every layer's
    pair at the fresh-page rate; below it, at prefill, or with no threshold (a GPU), nothing."""
    cal = replace(CAL, fresh_threshold=32 * 2**20, fresh_bandwidth=4e9)
    one_layer_k = GPT2.d_model * 4 * 256  # fp32 keys of one layer, one sequence of 256 tokens: 768 KiB
    past = step_time_breakdown(GPT2, 1, 256, 64, cal).set_index("group")  # 48 MiB per layer's K
    assert past.loc["cache copies: fresh pages", "bytes"] == 2 * GPT2.n_layers * 64 * one_layer_k
    assert past.loc["cache copies: fresh pages", "time_s"] == pytest.approx(2 * 12 * 64 * one_layer_k / 4e9)
    for below in (step_time_breakdown(GPT2, 1, 256, 32, cal),  # 24 MiB: the allocator reuses its blocks
                  step_time_breakdown(GPT2, 256, 256, 64, cal),  # prefill: no copy
                  step_time_breakdown(GPT2, 1, 256, 64, CAL)):  # no threshold measured
        assert "cache copies: fresh pages" not in set(below["group"])


def test_the_fresh_page_probe_finds_glibcs_mmap_threshold_and_times_its_pages():
    """Measured: on Linux with glibc, cache copies past 32 MiB map fresh pages on every call, at a finite rate."""
    import os
    import platform

    from helpers.course.step_time import probes

    if platform.libc_ver()[0] != "glibc" or any(name.startswith("MALLOC_") for name in os.environ):
        pytest.skip("the threshold checked is glibc's default")
    measured = {}
    threshold, rate = probes.measure_fresh_pages(torch.device("cpu"), torch.float32, measured)
    assert threshold == 32 * 2**20 and 0 < rate < 1e12 and len(measured) == 2, (threshold, rate, measured)


def test_a_latent_layer_copies_its_latent_as_keys_and_its_rotary_part_as_values():
    """Arithmetic: transformers caches an MLA layer's latent (kv_lora_rank wide) as keys and its rotary part as
    values, so the keys reach the threshold at a smaller batch than the values."""
    from helpers.course.step_time.calibrated import fresh_copy_bytes

    mla = helpers.model_spec("mini-deepseek-v3")
    keys, values = (256 * width * 4 for width in (mla.kv_lora_rank, mla.qk_rope_head_dim))  # 256 tokens, fp32
    assert keys > values
    assert fresh_copy_bytes(mla, [(1, 256)], 4, keys) == mla.n_layers * keys
    assert fresh_copy_bytes(mla, [(1, 256)], 4, values) == mla.n_layers * (keys + values)
    assert fresh_copy_bytes(mla, [(256, 256)], 4, values) == 0  # a prefill
