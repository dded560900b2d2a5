"""Chapter 7's module: closed forms, bad input named, and the speculative loop returning greedy's tokens."""

import math
import mmap
from types import SimpleNamespace

import pytest
import torch

import helpers
from helpers.course import faster_decode as fd


def test_tokens_per_verification_closed_form():
    assert fd.expected_tokens_per_verification(0.0, 4) == 1.0
    assert fd.expected_tokens_per_verification(1.0, 4) == 5.0
    assert math.isclose(fd.expected_tokens_per_verification(0.5, 3), 1 + 0.5 + 0.25 + 0.125)


def test_speculative_speedup_counts_draft_cost():
    assert fd.speculative_speedup(3.0, 1.5) == 2.0
    assert fd.speculative_speedup(3.0, 1.0, draft_over_step=0.5, k=4) == 1.0


@pytest.mark.parametrize("k, a, name", [(0, 0.5, "k"), (2.5, 0.5, "k"), (4, -0.1, "acceptance_rate"),
                                        (4, 1.5, "acceptance_rate"), (4, float("nan"), "acceptance_rate")])
def test_bad_speculation_names_the_argument(k, a, name):
    with pytest.raises(ValueError, match=name):
        fd.expected_tokens_per_verification(a, k)


@pytest.mark.parametrize("prefix, prompt", [(512, 256), (256, 256), (0, 256)])
def test_bad_prefix_names_the_argument(prefix, prompt):
    with pytest.raises(ValueError, match="prefix_len must be"):
        fd.check_prefix(prefix, prompt)


def test_generation_time():
    assert fd.generation_time(1.0, 0.5, 11, 2.0) == 1.0 + 10 / 2.0 * 0.5
    with pytest.raises(ValueError, match="tokens_per_forward"):
        fd.generation_time(1.0, 0.5, 11, 0.0)


def test_small_spec_counts_parameters():
    spec = fd.small_llama_spec(1, d_model=64, n_heads=4, d_ff=128, vocab_size=256)
    model = helpers.random_model(helpers.build_config(spec), "cpu", torch.float32)
    assert spec.n_params == sum(p.numel() for p in model.parameters())
    assert 0.98 < fd.linear_weights(model) / helpers.weight_bytes_read(spec, 1) <= 1  # norms are not linears


def test_kv_capacity_follows_the_bits():
    spec = fd.small_llama_spec(2)
    assert abs(fd.tokens_that_fit(spec, 2**30, 4) - 8 * fd.tokens_that_fit(spec, 2**30, 32)) < 8
    assert fd.tokens_that_fit(spec, 2**30, 8) == 2**30 // helpers.kv_cache_bytes(2, 12, 64, 1, 1, 1)


@pytest.fixture(scope="module")
def toy():
    spec = fd.small_llama_spec(2, d_model=64, n_heads=4, d_ff=128, vocab_size=256)
    return helpers.random_model(helpers.build_config(spec), "cpu", torch.float32)


@pytest.mark.parametrize("a", [0.0, 0.5, 1.0])
def test_speculative_generate_equals_greedy(toy, a):
    ids = helpers.random_prompt(8, 256, 1, "cpu")
    reference = helpers.greedy_generate(toy, ids, 12)
    out, verifications = fd.speculative_generate(toy, ids, 12, 3, a, reference)
    assert out == reference
    if a == 1.0:
        assert verifications == math.ceil(11 / 4)
    if a == 0.0:
        assert verifications == 11


def test_prefix_cache_gives_the_same_tokens(toy):
    ids = helpers.random_prompt(12, 256, 1, "cpu")
    with torch.no_grad():
        full = fd.greedy_continue(toy, *helpers.prefill(toy, ids), 5)
        _, prefix = helpers.prefill(toy, ids[:, :8])
        reused = fd.greedy_continue(toy, *fd.prefill_with_prefix(toy, prefix, ids[:, 8:]), 5)
    assert reused == full


def test_static_greedy_equals_greedy(toy):
    ids = helpers.random_prompt(8, 256, 1, "cpu")
    out, step = fd.static_greedy(toy.forward, toy, ids, 6)
    assert out == helpers.greedy_generate(toy, ids, 6)
    assert step().shape == (1, 1)
    assert step().item() == step().item()  # the same step each time: the cache is cut back before it


def test_decode_step_fn_keeps_the_context(toy):
    ids = helpers.random_prompt(8, 256, 2, "cpu")
    step = fd.decode_step_fn(toy, ids, 3)
    assert step().shape[:2] == (2, 3)
    assert step().shape[:2] == (2, 3)


def test_forward_counter_counts_generate_forwards(toy):
    ids = helpers.random_prompt(8, 256, 1, "cpu")
    _, calls = fd.forwards_of(toy, lambda: toy.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5,
                                                        do_sample=False))
    assert calls == 5


def test_fp8_cache_stores_one_byte_per_element_and_stays_close(toy):
    try:
        fp8 = fd.fp8_cache(toy)
    except (ValueError, ImportError) as error:  # transformers before 5.24 has no fp8 backend (chapter 7 says so)
        pytest.skip(f"this transformers has no fp8 cache: {error}")
    ids = helpers.random_prompt(10, 256, 1, "cpu")
    with torch.no_grad():
        token, cache = helpers.prefill(toy, ids, cache=fp8)
        reference = toy(token, use_cache=True, **helpers.cache_kwargs(toy, helpers.prefill(toy, ids)[1])).logits
        logits = toy(token, use_cache=True, **helpers.cache_kwargs(toy, cache)).logits
    assert fd.fp8_cache_nbytes(cache) == helpers.kv_cache_bytes(2, 4, 16, 11, 1, 1)  # 10 prompt tokens + 1
    assert 0 < fd.relative_error(reference, logits) < 0.1  # fp8 rounds the cache; the logits move a little


def test_fp8_breakdown_shrinks_the_copies_and_adds_the_dequantise():
    from test_step_model import fake_calibration

    spec, cal = fd.small_llama_spec(2), fake_calibration()
    base = helpers.step_time_breakdown(spec, 1, 1000, 1, cal).set_index("group")
    fp8 = fd.fp8_cache_breakdown(spec, 1000, cal, dequantize_rate=1e9, extra_ops=10).set_index("group")
    assert fp8.loc["cache copies", "bytes"] * 4 == base.loc["cache copies", "bytes"]
    assert fp8.loc["fp8 dequantise", "time_s"] == helpers.kv_cache_bytes(2, 12, 64, 1000, 1, 1) / 1e9
    assert fp8.loc["overhead (10 more ops)", "time_s"] == 10 * cal.op_overhead(spec.family)
    with pytest.raises(ValueError, match="dequantize_rate"):
        fd.fp8_cache_breakdown(spec, 1000, cal, dequantize_rate=0, extra_ops=0)


def test_op_recorder_splits_inside_from_outside_and_replays_library_calls():
    a = torch.randn(16, 16)
    recorder = fd.OpRecorder()
    forward = recorder.wrap(lambda x: (x @ a).relu() @ a)
    with torch.no_grad(), recorder:
        forward(a).sum()
    assert (recorder.inside_ops, recorder.outside_ops, len(recorder.library)) == (3, 1, 2)
    recorder.replay()()  # the two products again, nothing recorded


def test_guard_count_call_cost_and_skipping_guards():
    scale = torch.compile(lambda t: t * 2)
    x = torch.ones(3)
    scale(x)
    assert 0 < fd.guard_count(scale) < 50  # a one-op function checks few guards
    assert 0 < fd.compiled_call_cost() < 0.01
    unguarded = fd.without_guards(lambda: scale(x))
    assert unguarded is None or torch.equal(unguarded(), x * 2)


def test_page_faults_are_counted_and_priced():
    before = helpers.minor_page_faults()
    if before is None:
        pytest.skip("this OS does not count page faults")
    fresh = mmap.mmap(-1, 64 * 2**20)  # pages the OS has not mapped yet (an allocator may reuse freed ones)
    fresh[::4096] = b"x" * (64 * 2**20 // 4096)  # touch each page once
    assert helpers.minor_page_faults() > before  # one per page, or per huge page where the OS merges them
    fresh.close()
    assert 1e-8 < helpers.page_fault_seconds(8 * 2**20) < 1e-3


def test_torchao_int8_extra_prices_each_linear(toy):
    calibration = SimpleNamespace(fresh_threshold=64 * 128 * 4, fresh_bandwidth=1e9,  # d_ff and head: afresh
                                  read_bandwidth=2e9)
    extra = fd.torchao_int8_extra(toy, calibration, cache_bytes=2**20, repeats=3)
    assert 0 < extra["converting"] < 1 and extra["calls"] > 0  # a toy's few small layers
    sizes = [4 * m.weight.numel() for m in toy.modules() if isinstance(m, torch.nn.Linear)]
    assert extra["fresh pages"] == pytest.approx(sum(n for n in sizes if n >= 64 * 128 * 4) / 1e9)
    assert extra["matmuls read from cache"] == pytest.approx(-sum(n for n in sizes if n < 64 * 128 * 4) / 2e9)
    assert extra["matmuls read from cache"] < 0  # the attention projections stay in the heap and the cache
    with pytest.raises(ValueError, match="repeats"):
        fd.torchao_int8_extra(toy, calibration, 2**20, repeats=0)


def test_shifted_and_scaled_predictions_anchor_the_step_model_on_the_measured_baseline():
    # the step model says 100 ms -> 20 ms; the baseline measured 80 ms
    assert fd.shifted_prediction(0.080, 0.100, 0.020) == pytest.approx(0.000)  # the whole miss lands on 20 ms
    assert fd.scaled_prediction(0.080, 0.100, 0.020) == pytest.approx(0.016)  # the same 5x, anchored
    with pytest.raises(ValueError, match="predicted_base_s"):
        fd.scaled_prediction(0.080, 0.0, 0.020)
