"""Unit tests for helpers.serving: request streams, step costs, the three schedulers and the metrics."""

import math

import numpy as np
import pandas as pd
import pytest
from fake_sse_server import fake_server

import helpers
from helpers import gpu_spec, kv_cache_bytes, model_spec
from helpers.course.kv_cache import kv_capacity_tokens, rewind_cache, tensor_parallel_memory
from helpers.course.serving.metrics import check_conservation, serving_metrics
from helpers.course.serving.requests import Request, Served, poisson_requests, requests_from_table
from helpers.course.serving.server import benchmark_server, stream_completion
from helpers.course.serving.simulator import SCHEDULERS, simulate
from helpers.course.step_time import CalibratedStepCost, Calibration, LinearStepCost, RooflineStepCost, fit_linear_cost
from helpers.course.step_time.probes import MATMUL_TOKENS
from helpers.plumbing.device import device_name

UNIT = LinearStepCost(1.0, 0.0)  # every step takes one second: times can be worked by hand


def tiny_trace() -> list[Request]:
    """A arrives at 0 (prompt 2, 3 tokens); B at 0.5 (prompt 2, 2 tokens)."""
    return requests_from_table(pd.DataFrame({"arrival": [0.0, 0.5], "prompt_len": [2, 2], "output_len": [3, 2]}))


# ------------------------------------------------------------------------------------------ hand-computed


def test_static_tiny_trace_by_hand():
    # Only A has arrived at 0: batch [A] runs steps 0-1 (prefill), 1-2, 2-3. Then B: 3-4 (prefill), 4-5.
    sim = simulate(tiny_trace(), UNIT, "static", max_batch=2)
    assert [s.token_times for s in sim.served] == [[1.0, 2.0, 3.0], [4.0, 5.0]]
    table = sim.requests_table()
    assert table["ttft_s"].tolist() == [1.0, 3.5]
    assert table["e2el_s"].tolist() == [3.0, 4.5]
    assert table["tpot_s"].tolist() == [1.0, 1.0]


def test_continuous_tiny_trace_by_hand():
    # B joins at step 1-2 (its prefill beside A's decode), so it gets its first token at 2.
    sim = simulate(tiny_trace(), UNIT, "continuous", max_batch=2)
    assert [s.token_times for s in sim.served] == [[1.0, 2.0, 3.0], [2.0, 3.0]]
    assert sim.steps["sequences"].tolist() == [1, 2, 2]
    assert sim.steps["tokens"].tolist() == [2, 3, 2]
    assert sim.steps["prefill_tokens"].tolist() == [2, 2, 0]


def test_chunked_tiny_trace_by_hand():
    # Budget 2 tokens a step: step 1-2 holds A's decode and 1 of B's 2 prompt tokens; B's first token at 3.
    sim = simulate(tiny_trace(), UNIT, "chunked", max_batch=2, max_tokens_per_step=2)
    assert [s.token_times for s in sim.served] == [[1.0, 2.0, 3.0], [3.0, 4.0]]
    assert sim.steps["tokens"].tolist() == [2, 2, 2, 1]


def test_metrics_tiny_trace_by_hand():
    m = serving_metrics(simulate(tiny_trace(), UNIT, "continuous", max_batch=2).served)
    assert m["completed"] == 2
    assert m["duration_s"] == 3.0  # first arrival 0 to last token 3
    assert m["ttft_mean_s"] == pytest.approx((1.0 + 1.5) / 2)
    assert m["e2el_mean_s"] == pytest.approx((3.0 + 2.5) / 2)
    assert m["tpot_mean_s"] == pytest.approx(1.0)
    assert m["itl_p50_s"] == pytest.approx(1.0)  # gaps 1, 1 (A) and 1 (B)
    assert m["output_throughput"] == pytest.approx(5 / 3)
    assert m["total_token_throughput"] == pytest.approx(9 / 3)
    assert m["request_throughput"] == pytest.approx(2 / 3)


def test_metrics_percentiles_and_single_token_tpot():
    served = [Served(Request(0, 0.0, 4, 1), [2.0]), Served(Request(1, 1.0, 4, 3), [2.0, 3.0, 5.0])]
    m = serving_metrics(served, qs=(50, 99))
    assert m["ttft_p50_s"] == pytest.approx(1.5)  # TTFTs 2 and 1
    assert m["tpot_mean_s"] == pytest.approx(1.5)  # only request 1: (4 - 1) / 2
    assert m["itl_mean_s"] == pytest.approx(1.5)  # gaps 1 and 2
    assert "itl_p90_s" not in m and "itl_p99_s" in m
    assert math.isnan(served[0].tpot)


def test_cost_is_linear_in_tokens_and_context():
    cost = LinearStepCost(0.01, 0.001, 1e-5)
    assert cost([(10, 100), (1, 50)]) == pytest.approx(0.01 + 0.011 + 150e-5)


# ------------------------------------------------------------------------------------------- properties


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_every_request_is_served_once(scheduler):
    requests = poisson_requests(60, rate=30.0, prompt_len=64, output_len=16, seed=1)
    sim = simulate(requests, LinearStepCost(0.01, 1e-4, 1e-6), scheduler, max_batch=8, kv_capacity=2000)
    check_conservation(requests, sim)
    assert len(sim.served) == 60
    assert sum(len(s.token_times) for s in sim.served) == sum(r.output_len for r in requests)


@pytest.mark.parametrize("scheduler", SCHEDULERS)
def test_batch_and_kv_limits_hold(scheduler):
    requests = poisson_requests(40, rate=math.inf, prompt_len=32, output_len=8, range_ratio=0.0)
    sim = simulate(requests, UNIT, scheduler, max_batch=4, kv_capacity=3 * 40)
    assert sim.steps["sequences"].max() <= 3  # 40 KV tokens per request, room for 3


def test_chunked_budget_holds():
    requests = poisson_requests(20, rate=math.inf, prompt_len=300, output_len=4)
    sim = simulate(requests, UNIT, "chunked", max_batch=8, max_tokens_per_step=128)
    assert sim.steps["tokens"].max() <= 128


def test_continuous_beats_static_on_ttft_under_load():
    requests = poisson_requests(200, rate=8.0, prompt_len=256, output_len=128, seed=0)
    cost = RooflineStepCost(model_spec("llama-3-8b"), gpu_spec("H100 SXM"), overhead_s=0.02)
    static = serving_metrics(simulate(requests, cost, "static", max_batch=32).served)
    continuous = serving_metrics(simulate(requests, cost, "continuous", max_batch=32).served)
    assert continuous["ttft_mean_s"] < static["ttft_mean_s"]


def test_calibrated_step_cost_drives_every_scheduler():
    """Chapter 5 simulates this device with chapter 8's CalibratedStepCost (a calibration made by hand here)."""
    rates = (2e9, 8e9, 3e10, 8e10, 1e11, 1.2e11, 1.2e11)
    calibration = Calibration(device_name("cpu"), "cpu", "float32", MATMUL_TOKENS,
                              {"x@W": rates, "linear": rates, "lm_head": rates[:3]}, 1e10, 3e10, 2e10, 8e10,
                              {"gpt2": 1e-5})
    cost = CalibratedStepCost(model_spec("gpt2"), calibration)
    requests = poisson_requests(30, rate=20.0, prompt_len=64, output_len=8, seed=2)
    for scheduler in SCHEDULERS:
        sim = simulate(requests, cost, scheduler, max_batch=8)
        check_conservation(requests, sim)
        with_prompt = sim.steps["prefill_tokens"] > 0
        assert sim.steps["seconds"][with_prompt].median() > sim.steps["seconds"][~with_prompt].median()

def test_idle_engine_waits_for_arrivals():
    requests = [Request(0, 0.0, 1, 1), Request(1, 10.0, 1, 1)]
    for scheduler in SCHEDULERS:
        sim = simulate(requests, UNIT, scheduler)
        assert [s.token_times for s in sim.served] == [[1.0], [11.0]]


def test_poisson_requests_shape_and_seed():
    a = poisson_requests(1000, rate=4.0, prompt_len=100, output_len=50, range_ratio=0.5, seed=3)
    assert a == poisson_requests(1000, rate=4.0, prompt_len=100, output_len=50, range_ratio=0.5, seed=3)
    assert a[0].arrival == 0.0
    arrivals = [r.arrival for r in a]
    assert arrivals == sorted(arrivals)
    assert 1000 / arrivals[-1] == pytest.approx(4.0, rel=0.1)
    assert min(r.prompt_len for r in a) >= 50 and max(r.prompt_len for r in a) <= 150
    assert all(r.arrival == 0.0 for r in poisson_requests(5, rate=math.inf))


def test_prompt_text_is_prompt_len_tokens_and_shares_no_prefix():
    tokenizer = helpers.offline_tokenizer(8192)
    rng = np.random.default_rng(0)
    prompts = [helpers.prompt_text(n, rng) for n in (1, 16, 100, 100)]
    assert [len(tokenizer(p).input_ids) for p in prompts] == [1, 16, 100, 100]
    assert prompts[2][:60] != prompts[3][:60]  # a server's prefix cache finds nothing to reuse
    with pytest.raises(ValueError, match="prompt_len"):
        helpers.prompt_text(0, rng)


def test_roofline_cost_decode_is_weight_bound():
    spec, gpu = model_spec("llama-3-8b"), gpu_spec("H100 SXM")
    cost = RooflineStepCost(spec, gpu)
    step_bytes = helpers.weight_bytes_read(spec, 2) + spec.kv_bytes_per_token(2)
    assert cost([(1, 1)]) == pytest.approx(step_bytes / gpu.bandwidth)
    big_prefill = cost([(8192, 8192)])
    assert big_prefill > 2 * spec.n_params * 8192 / gpu.peak_flops * 0.9  # compute-bound
    assert RooflineStepCost(spec, gpu, tensor_parallel=2)([(1, 1)]) == pytest.approx(cost([(1, 1)]) / 2)


def test_fit_linear_cost_recovers_a_line():
    cost = fit_linear_cost([1, 2, 4, 8], [0.011, 0.012, 0.014, 0.018])
    assert cost.fixed_s == pytest.approx(0.010) and cost.per_token_s == pytest.approx(0.001)
    with_ctx = fit_linear_cost([1, 2, 4, 1], [1.1, 1.2, 1.4, 2.1], context_tokens=[0, 0, 0, 1])
    assert with_ctx.per_context_token_s == pytest.approx(1.0)


def test_tensor_parallel_memory():
    spec = model_spec("llama-3-70b")
    one = tensor_parallel_memory(spec, 1, 4096, 8)
    assert one["kv_bytes"] == kv_cache_bytes(80, 8, 128, 4096, 8) == 327_680 * 4096 * 8
    four = tensor_parallel_memory(spec, 4, 4096, 8)
    assert four["weights_bytes"] == pytest.approx(one["weights_bytes"] / 4)
    assert four["kv_bytes"] == one["kv_bytes"] // 4
    sixteen = tensor_parallel_memory(spec, 16, 4096, 8)  # 8 KV heads on 16 GPUs: one head each, replicated
    assert sixteen["kv_heads_per_gpu"] == 1 and sixteen["kv_bytes"] == one["kv_bytes"] // 8


def test_kv_capacity_tokens():
    spec, gpu = model_spec("llama-3-8b"), gpu_spec("H100 SXM")
    expected = (81_559 * 2**20 * 0.92 - spec.weight_bytes(2)) // spec.kv_bytes_per_token(2)  # 0.92 of 81,559 MiB
    assert kv_capacity_tokens(spec, gpu) == expected
    assert kv_capacity_tokens(model_spec("llama-3-70b"), gpu) == 0  # 141 GB of weights do not fit in 0.92 x 80 GiB
    assert kv_capacity_tokens(model_spec("llama-3-70b"), gpu, tensor_parallel=4) > 0
    fp8_kv = kv_capacity_tokens(spec, gpu, bytes_per_elem=1)  # a 1-byte cache holds twice the tokens
    assert fp8_kv == (81_559 * 2**20 * 0.92 - spec.weight_bytes(2)) // spec.kv_bytes_per_token(1)


# ------------------------------------------------------------------------------------------ bad inputs


@pytest.mark.parametrize("kwargs, message", [
    ({"scheduler": "fifo"}, "scheduler must be one of"),
    ({"max_batch": 0}, "max_batch"),
    ({"kv_capacity": 3}, "could never be served"),
    ({"kv_capacity": 0}, "kv_capacity"),
    ({"scheduler": "continuous", "max_tokens_per_step": 64}, "only applies"),
    ({"scheduler": "chunked", "max_batch": 8, "max_tokens_per_step": 4}, "must be >= max_batch"),
])
def test_simulate_rejects_bad_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        simulate(tiny_trace(), UNIT, **kwargs)


@pytest.mark.parametrize("requests, message", [
    ([], "empty"),
    ([Request(0, -1.0, 2, 2)], "arrival"),
    ([Request(0, 0.0, 0, 2)], "prompt_len"),
    ([Request(0, 0.0, 2, 0)], "output_len"),
    ([Request(0, 0.0, 2, 2), Request(0, 1.0, 2, 2)], "unique"),
])
def test_simulate_rejects_bad_requests(requests, message):
    with pytest.raises(ValueError, match=message):
        simulate(requests, UNIT)


def test_simulate_rejects_a_zero_cost_step():
    with pytest.raises(ValueError, match="step cost must be > 0"):
        simulate(tiny_trace(), LinearStepCost(0.0, 0.0))


@pytest.mark.parametrize("kwargs, message", [
    ({"n": 0}, "n must"), ({"rate": 0.0}, "rate must"), ({"rate": -1.0}, "rate must"),
    ({"prompt_len": 0}, "prompt_len"), ({"output_len": 1.5}, "output_len"), ({"range_ratio": 1.0}, "range_ratio"),
])
def test_poisson_requests_rejects_bad_input(kwargs, message):
    args = {"n": 4, "rate": 1.0} | kwargs
    with pytest.raises(ValueError, match=message):
        poisson_requests(**args)


def test_other_bad_inputs():
    with pytest.raises(ValueError, match="must be >= 0"):
        LinearStepCost(-1.0, 0.0)
    with pytest.raises(ValueError, match=">= 2 matching"):
        fit_linear_cost([1], [1.0])
    with pytest.raises(ValueError, match="lacks columns"):
        requests_from_table(pd.DataFrame({"arrival": [0.0]}))
    with pytest.raises(ValueError, match="tp must divide"):
        tensor_parallel_memory(model_spec("llama-3-8b"), 3, 128)
    with pytest.raises(ValueError, match="memory_fraction"):
        kv_capacity_tokens(model_spec("gpt2"), gpu_spec("T4"), memory_fraction=0.0)
    with pytest.raises(ValueError, match="no request"):
        serving_metrics([Served(Request(0, 0.0, 1, 1))])


# ------------------------------------------------------------------------------- a fake streaming server


def test_stream_completion_and_benchmark_against_a_fake_server():
    with fake_server() as url:
        times = stream_completion(url, "fake", "hello", 5)
        assert len(times) == 5 and times == sorted(times)
        served = benchmark_server(url, "fake", [Request(0, 0.0, 3, 4), Request(1, 0.05, 3, 2)])
    assert [len(s.token_times) for s in served] == [4, 2]
    assert served[1].request.arrival >= 0.05
    assert serving_metrics(served)["completed"] == 2


def test_rewind_cache_drops_the_new_tokens():
    import torch
    from transformers import AutoConfig

    from helpers import cache_kwargs, get_cache, random_model

    config = AutoConfig.for_model("gpt2", n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=64)
    model = random_model(config, "cpu", torch.float32)
    with torch.no_grad():
        cache = get_cache(model(torch.zeros(2, 5, dtype=torch.long), use_cache=True))
        model(torch.zeros(2, 1, dtype=torch.long), use_cache=True, **cache_kwargs(model, cache))
        assert cache.get_seq_length() == 6
        rewind_cache(cache, 5)
        assert cache.get_seq_length() == 5
        rewind_cache(cache, 5)  # nothing to drop
        assert cache.get_seq_length() == 5
    with pytest.raises(ValueError, match="fewer than"):
        rewind_cache(cache, 9)


# ------------------------------------------------------------------------------------------ the step trace


def test_trace_of_the_tiny_trace_by_hand():
    # continuous: step 0 A prefills (B not yet arrived); step 1 A decodes beside B's prefill; step 2 both decode
    sim = simulate(tiny_trace(), UNIT, "continuous", max_batch=2, trace=True)
    rows = [(r.step, r.id, r.state, r.tokens) for r in sim.trace.itertuples(index=False)]
    assert rows == [(0, 0, "prefill", 2), (1, 0, "decode", 1), (1, 1, "prefill", 2), (2, 0, "decode", 1),
                    (2, 1, "decode", 1)]


def test_trace_marks_waiting_padding_and_stalled():
    static = simulate(tiny_trace(), UNIT, "static", max_batch=2, trace=True).trace
    assert set(static[static["id"] == 1]["state"]) == {"waiting", "prefill", "decode"}  # B queues behind A's batch
    both = requests_from_table(pd.DataFrame({"arrival": [0.0, 0.0], "prompt_len": [2, 2], "output_len": [1, 3]}))
    padded = simulate(both, UNIT, "static", max_batch=2, trace=True).trace
    assert "padding" in set(padded[padded["id"] == 0]["state"])  # A is done, still computed beside B
    chunked = simulate(both, UNIT, "chunked", max_batch=2, max_tokens_per_step=2, trace=True).trace
    assert (chunked["step"] == 0).sum() == 2 and "stalled" in set(chunked[chunked["step"] == 0]["state"])


def test_trace_is_off_by_default_and_changes_nothing():
    plain = simulate(tiny_trace(), UNIT, "chunked", max_batch=2, max_tokens_per_step=2)
    traced = simulate(tiny_trace(), UNIT, "chunked", max_batch=2, max_tokens_per_step=2, trace=True)
    assert plain.trace is None
    assert [s.token_times for s in plain.served] == [s.token_times for s in traced.served]
    pd.testing.assert_frame_equal(plain.steps, traced.steps)


def test_compute_bound_batch():
    from helpers.course.step_time import compute_bound_batch

    h100 = gpu_spec("H100 SXM")
    # GPT-2 large (multi-head) at 960 tokens: each sequence's KV bytes outlast its FLOPs, the bend never comes
    assert math.isinf(compute_bound_batch(model_spec("gpt2-large"), 960, h100.peak_flops, h100.bandwidth))
    # GQA at a short context: a bend exists, beyond the KV-free ridge-point batch, and DynamicCache copies push it out
    m = model_spec("llama-3-8b")
    static = compute_bound_batch(m, 256, h100.peak_flops, h100.bandwidth)
    kv_free = helpers.weight_bytes_read(m) / h100.bandwidth / (helpers.forward_flops(m, 1, 256) / h100.peak_flops)
    assert kv_free < static < math.inf
    assert compute_bound_batch(m, 256, h100.peak_flops, h100.bandwidth, cache="dynamic") > static
    step = RooflineStepCost(m, h100)  # at the bend, compute and memory time agree
    b = round(static)
    flops = b * helpers.forward_flops(m, 1, 256) / h100.peak_flops
    assert step([(1, 256)] * b) == pytest.approx(flops, rel=0.01)


def test_fit_linear_cost_recovers_a_per_sequence_term():
    tokens, sequences = [214, 8, 8, 3, 4, 13, 1, 2], [8, 8, 8, 3, 4, 4, 1, 2]
    seconds = [1e-3 + 1e-5 * t + 2e-4 * s for t, s in zip(tokens, sequences, strict=True)]
    cost = fit_linear_cost(tokens, seconds, sequences=sequences)
    assert cost.fixed_s == pytest.approx(1e-3) and cost.per_token_s == pytest.approx(1e-5)
    assert cost.per_sequence_s == pytest.approx(2e-4)
    assert cost([(1, 10), (1, 20)]) == pytest.approx(1e-3 + 2e-5 + 4e-4)
    with pytest.raises(ValueError, match="sequences"):
        fit_linear_cost([1, 2], [1.0, 2.0], sequences=[1])


def test_held_back_tokens_are_special_or_part_of_a_character():
    from helpers.course.serving.server import held_back_tokens

    tokenizer = helpers.offline_tokenizer(4096)
    held = held_back_tokens(tokenizer)
    assert tokenizer.eos_token_id in held
    assert tokenizer(" the").input_ids[0] not in held
    assert all("\ufffd" in tokenizer.decode([i]) for i in held if i != tokenizer.eos_token_id)


def test_roofline_cost_runs_the_lm_head_once_per_sequence():
    spec, gpu = model_spec("llama-3-8b"), gpu_spec("H100 SXM")
    prefill = RooflineStepCost(spec, gpu)([(8192, 8192)])  # compute-bound: the FLOP time
    assert prefill == pytest.approx(helpers.forward_flops(spec, 8192, logits_positions=1) / gpu.peak_flops)
    assert prefill < helpers.forward_flops(spec, 8192) / gpu.peak_flops  # the head on every position costs more


def test_longest_compute_bound_context():
    from helpers.course.step_time import compute_bound_batch, longest_compute_bound_context

    h100 = gpu_spec("H100 SXM")
    m = model_spec("llama-3-8b")
    longest = longest_compute_bound_context(m, h100.peak_flops, h100.bandwidth)
    assert 300 < longest < 500  # Llama-3-8B on an H100, KV read once: only short contexts can bend
    assert math.isfinite(compute_bound_batch(m, longest, h100.peak_flops, h100.bandwidth))
    assert math.isinf(compute_bound_batch(m, longest + 1, h100.peak_flops, h100.bandwidth))
    assert longest_compute_bound_context(model_spec("gpt2-large"), h100.peak_flops, h100.bandwidth) < 960
