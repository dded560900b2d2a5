"""run_live and the stall arithmetic: transformers' engine serving requests that arrive over time, run for real on
a tiny model (no mock), and the course's own arithmetic on hand-made token times."""

import threading

import numpy as np
import pandas as pd
import pytest
import torch
from transformers import GenerationConfig

import helpers
from helpers.course.serving.engine import (
    PackedStepCost,
    engine_step_cost,
    interference_metrics,
    run_live,
    stall_workload,
    stalls,
    step_periods,
    step_price_error,
)
from helpers.course.step_time import LinearStepCost

GREEDY = GenerationConfig(do_sample=False, max_new_tokens=8, eos_token_id=-1, pad_token_id=0)


@pytest.fixture(scope="module")
def tiny():
    config = helpers.gpt2_style_config(d_model=64, n_layers=2, n_heads=2, n_positions=256, vocab_size=256)
    return helpers.random_model(config, device="cpu", dtype=torch.float32)


@pytest.mark.parametrize("scheduler", ["fifo", "prefill_first"])
def test_every_request_arrives_on_time_and_gets_its_tokens(tiny, scheduler):
    requests = stall_workload(3, 8, 12, long_prompts=[100], long_at=[0.05], long_output=3, spacing_s=0.01)
    prompts = [list(range(1, r.prompt_len + 1)) for r in requests]
    threads = threading.active_count()
    run = run_live(tiny, requests, prompts, GREEDY, max_batch_tokens=32, scheduler=scheduler, block_size=16,
                   num_blocks=64, warmup=[[1, 2, 3]])
    assert [len(s.token_times) for s in run.served] == [12, 12, 12, 3] and all(s.ok for s in run.served)
    assert [s.request.arrival for s in run.served] == sorted(s.request.arrival for s in run.served)
    assert run.served[3].request.arrival >= 0.05 and all(s.ttft > 0 for s in run.served)
    # the budget holds in every step, and the 100-token prompt needed several of them
    assert run.steps["tokens"].max() <= 32 and run.steps["tokens"].sum() == 3 * 8 + 100 + 3 * 11 + 2
    assert threading.active_count() == threads  # the engine's thread was stopped


def test_each_step_records_the_keys_its_attention_reads(tiny):
    """A lone request: its prompt's step reads its 8 keys, each decode step one key more (cache and new token)."""
    run = run_live(tiny, [helpers.Request(0, 0.0, 8, 4)], [list(range(1, 9))], GREEDY, max_batch_tokens=64,
                   block_size=16, num_blocks=64, warmup=[[1, 2, 3]])
    assert run.steps["tokens"].tolist() == [8, 1, 1, 1] and run.steps["kv_tokens"].tolist() == [8, 9, 10, 11]


def test_a_request_that_times_out_is_counted_not_dropped(tiny):
    requests = [helpers.Request(0, 0.0, 4, 200)]
    run = run_live(tiny, requests, [[1, 2, 3, 4]], GREEDY, max_batch_tokens=64, block_size=16, num_blocks=64,
                   timeout=0.05)
    assert len(run.served) == 1 and not run.served[0].ok


@pytest.mark.parametrize(("kwargs", "name"), [({"scheduler": "lifo"}, "scheduler"),
                                              ({"max_batch_tokens": 0}, "max_batch_tokens")])
def test_bad_settings_name_the_argument(tiny, kwargs, name):
    args = {"max_batch_tokens": 16, **kwargs}
    with pytest.raises(ValueError, match=name):
        run_live(tiny, [helpers.Request(0, 0.0, 2, 2)], [[1, 2]], GREEDY, **args)


def test_the_stall_is_the_longest_gap_spanning_the_long_prompt():
    """Course arithmetic: a short request's gaps 10, 10, 50, 10 ms; the long prompt arrives at 25 ms, first
    token at 70 ms: the gaps that overlap [25, 70] are the 10 ms one ending at 30 and the 50 ms one."""
    workload = stall_workload(1, 4, 5, long_prompts=[64], long_at=[0.025])
    short = helpers.Served(workload[0], [0.01, 0.02, 0.03, 0.08, 0.09])
    long = helpers.Served(workload[1], [0.08, 0.09])
    assert stalls([short, long], [1]) == pytest.approx([0.05])
    m = interference_metrics([short, long], [1])
    assert m["itl_max_s"] == pytest.approx(0.05) and m["long_ttft_s"] == pytest.approx(0.055)
    assert m["itl_p50_s"] == pytest.approx(0.01) and m["failed"] == 0


def test_bad_workloads_name_the_argument():
    with pytest.raises(ValueError, match="long_prompts"):
        stall_workload(2, 8, 8, long_prompts=[64, 128], long_at=[0.1])
    with pytest.raises(ValueError, match="spacing_s"):
        stall_workload(2, 8, 8, long_prompts=[64], long_at=[0.1], spacing_s=-1)


def test_a_wait_for_the_next_arrival_is_no_part_of_a_step():
    """Course arithmetic: forwards of 2 ms with 0.5 ms after each, but 100 ms idle after the second."""
    steps = pd.DataFrame({"start_s": [0.0, 0.0025, 0.1045, 0.107], "seconds": [0.002] * 4,
                          "tokens": [1] * 4, "sequences": [1] * 4})
    assert step_periods(steps) == pytest.approx([0.0025, 0.0025, 0.0025])


def test_engine_step_cost_recovers_a_known_line():
    """Course arithmetic: steps priced 1 ms + 10 µs a token + 100 µs a sequence are fitted back exactly."""
    tokens, sequences = np.array([1, 8, 40, 200, 9, 3]), np.array([1, 8, 3, 5, 2, 3])
    seconds = 1e-3 + 1e-5 * tokens + 1e-4 * sequences
    steps = pd.DataFrame({"start_s": np.concatenate([[0.0], np.cumsum(seconds)]), "seconds": [*seconds, 0.0],
                          "tokens": [*tokens, 1], "sequences": [*sequences, 1]})
    cost = engine_step_cost(steps)
    assert (cost.fixed_s, cost.per_token_s, cost.per_sequence_s) == pytest.approx((1e-3, 1e-5, 1e-4))


def test_engine_step_cost_recovers_a_per_score_term():
    """Course arithmetic: steps priced with 2 ns per score (new tokens x keys of the step) are fitted back, and
    the fitted cost prices a step's work the way the engine packs it."""
    tokens, sequences = np.array([8, 8, 264, 8, 776, 9, 96, 520]), np.array([8, 8, 9, 8, 9, 9, 5, 4])
    keys = np.array([300, 400, 700, 520, 1300, 600, 200, 900])
    seconds = 1e-3 + 1e-5 * tokens + 1e-4 * sequences + 2e-9 * tokens * keys
    steps = pd.DataFrame({"start_s": np.concatenate([[0.0], np.cumsum(seconds)]), "seconds": [*seconds, 0.0],
                          "tokens": [*tokens, 1], "sequences": [*sequences, 1], "kv_tokens": [*keys, 1]})
    cost = engine_step_cost(steps)
    assert isinstance(cost, PackedStepCost)
    assert (cost.fixed_s, cost.per_token_s, cost.per_sequence_s, cost.per_score_s) == pytest.approx(
        (1e-3, 1e-5, 1e-4, 2e-9))
    work = [(1, 64)] * 8 + [(256, 256)]  # 8 decodes and a 256-token prompt: 264 new tokens, 768 keys
    assert cost(work) == pytest.approx(1e-3 + 264e-5 + 9e-4 + 2e-9 * 264 * 768)
    assert step_price_error(steps, cost) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(ValueError, match="per_score_s"):
        PackedStepCost(1e-3, 1e-5, per_score_s=-1.0)
    with pytest.raises(ValueError, match="steps must hold at least 5"):
        engine_step_cost(steps.iloc[:4])
    assert PackedStepCost(0.0, 0.0, 1e-6, per_score_s=0.0).price(steps)[0] == pytest.approx(300e-6)  # 300 keys


def test_step_price_error_tests_the_price_of_the_steps_run():
    """Course arithmetic: the line that made the steps prices them exactly; one 10% dearer is 10% high."""
    tokens, sequences = np.array([5, 50, 6]), np.array([5, 6, 6])
    seconds = 2e-3 + 1e-5 * tokens + 1e-4 * sequences
    steps = pd.DataFrame({"start_s": np.concatenate([[0.0], np.cumsum(seconds)]), "seconds": [*seconds, 0.0],
                          "tokens": [*tokens, 1], "sequences": [*sequences, 1]})
    exact = LinearStepCost(2e-3, 1e-5, per_sequence_s=1e-4)
    dearer = LinearStepCost(2.2e-3, 1.1e-5, per_sequence_s=1.1e-4)
    assert step_price_error(steps, exact) == pytest.approx(0.0, abs=1e-12)
    assert step_price_error(steps, dearer) == pytest.approx(0.1)


def test_engine_step_cost_refits_the_other_parts_when_one_fits_negative():
    """Course arithmetic: steps whose time falls with their scores fit a negative per-score price; it is set
    to 0 and the other parts are the least-squares fit without it, not the values fitted beside it."""
    tokens, sequences = np.array([8, 8, 264, 8, 776, 9, 96, 520]), np.array([8, 8, 9, 8, 9, 9, 5, 4])
    keys = np.array([300, 400, 700, 520, 1300, 600, 200, 900])
    seconds = 5e-3 + 1e-5 * tokens + 1e-4 * sequences - 2e-9 * tokens * keys
    steps = pd.DataFrame({"start_s": np.concatenate([[0.0], np.cumsum(seconds)]), "seconds": [*seconds, 0.0],
                          "tokens": [*tokens, 1], "sequences": [*sequences, 1], "kv_tokens": [*keys, 1]})
    cost = engine_step_cost(steps)
    without = np.column_stack([np.ones(len(tokens)), tokens, sequences])
    refitted, *_ = np.linalg.lstsq(without, seconds, rcond=None)
    assert cost.per_score_s == 0.0
    assert (cost.fixed_s, cost.per_token_s, cost.per_sequence_s) == pytest.approx(tuple(refitted))
    assert cost.per_token_s != pytest.approx(1e-5)  # the values fitted beside the negative part are not kept


def test_a_cost_prices_recorded_steps_as_it_prices_their_work():
    steps = pd.DataFrame({"tokens": [1, 64], "sequences": [1, 2], "kv_tokens": [100, 300]})
    work = [[(1, 100)], [(32, 150), (32, 150)]]  # the same steps as (new tokens, keys) per sequence
    for cost in (LinearStepCost(1e-3, 1e-5, per_context_token_s=1e-6, per_sequence_s=1e-4),
                 PackedStepCost(1e-3, 1e-5, per_sequence_s=1e-4, per_score_s=1e-8)):
        assert cost.price(steps) == pytest.approx([cost(w) for w in work])
