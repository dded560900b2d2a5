"""The roofline step time: one rule, checked against the closed forms of helpers.formulas (course arithmetic)."""

import math

import pytest

import helpers
from helpers.course.step_time import RooflineStepCost, check_work, request_roofline, spec_sheet_time, step_roofline

GPT2 = helpers.model_spec("gpt2")
PEAK, BW = 1e12, 5e10


def test_a_decode_step_reads_the_weights_and_the_cache_once():
    terms = step_roofline(GPT2, [(1, 500)], PEAK, BW, 4)
    assert terms.flops == helpers.forward_flops(GPT2, 1, 500)
    assert terms.read_bytes == helpers.decode_step_bytes(GPT2, 500, 1, 4, cache="static")
    assert terms.copy_bytes == 0
    assert terms.time_s == helpers.roofline_time(terms.flops, terms.read_bytes, PEAK, BW)
    assert terms.bound == "memory"


def test_dynamic_cache_copies_are_read_and_written_at_the_copy_ceiling():
    static = step_roofline(GPT2, [(1, 500)], PEAK, BW, 4)
    dynamic = step_roofline(GPT2, [(1, 500)], PEAK, BW, 4, cache="dynamic", copy_bandwidth=BW / 2)
    kv = GPT2.kv_bytes_per_token(4)
    assert dynamic.copy_bytes == kv * (499 + 500)  # torch.cat reads the old cache and writes the new one
    assert dynamic.copy_s == pytest.approx(dynamic.copy_bytes / (BW / 2))
    assert dynamic.time_s == pytest.approx(static.time_s + dynamic.copy_s)


def test_no_cache_recomputes_every_position_and_reads_only_weights():
    terms = step_roofline(GPT2, [(64, 64)], PEAK, BW, 4, cache="none", logits_positions=None)
    assert terms.read_bytes == helpers.weight_bytes_read(GPT2, 4)
    assert terms.flops == helpers.forward_flops(GPT2, 64)  # logits at all 64 positions


def test_a_batch_shares_the_weights_but_not_the_caches():
    one, four = (step_roofline(GPT2, [(1, 300)] * b, PEAK, BW, 2) for b in (1, 4))
    weights = helpers.weight_bytes_read(GPT2, 2)
    assert four.read_bytes - weights == 4 * (one.read_bytes - weights)
    assert four.flops == 4 * one.flops


def test_the_costs_built_on_it_agree():
    gpu = helpers.gpu_spec("H200")
    work = [(1, 700), (1, 30), (200, 200)]
    assert RooflineStepCost(GPT2, gpu)(work) == step_roofline(GPT2, work, gpu.peak_flops, gpu.bandwidth).time_s
    ttft, decode = request_roofline(GPT2, 100, 11, PEAK, BW, 4)
    assert ttft == step_roofline(GPT2, [(100, 100)], PEAK, BW, 4).time_s
    assert decode == 10 * step_roofline(GPT2, [(1, 105)], PEAK, BW, 4).time_s
    sheet = spec_sheet_time(GPT2, 8, 8, 2, PEAK, BW, 4)
    assert sheet == helpers.roofline_time(2 * helpers.forward_flops(GPT2, 8), helpers.decode_step_bytes(GPT2, 8, 2, 4),
                                          PEAK, BW)


@pytest.mark.parametrize("work", [[(0, 5)], [(6, 5)], [(1.5, 5)]])
def test_impossible_work_is_named(work):
    with pytest.raises(ValueError, match="work must hold"):
        check_work(work)
    with pytest.raises(ValueError, match="work must hold"):
        step_roofline(GPT2, work, PEAK, BW)


def test_bad_rates_and_caches_are_named():
    with pytest.raises(ValueError, match="cache"):
        step_roofline(GPT2, [(1, 5)], PEAK, BW, cache="paged")
    with pytest.raises(ValueError, match="bandwidth"):
        step_roofline(GPT2, [(1, 5)], PEAK, 0.0)
    assert math.isfinite(step_roofline(GPT2, [], PEAK, BW).time_s)  # an empty step still reads the weights
