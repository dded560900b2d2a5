"""Checks of the course's own arithmetic for "prefill meets decode": the prefill_first order against fifo, goodput,
and disaggregated prefill and decode. Every expected value below is worked by hand in the comments."""

import math

import pandas as pd
import pytest

import helpers
from helpers.course.serving.metrics import check_conservation, goodput
from helpers.course.serving.requests import Request, Served, poisson_requests
from helpers.course.serving.simulator import (
    Limits,
    Seq,
    kv_transfer_s,
    schedule,
    simulate,
    simulate_disaggregated,
    simulate_replicas,
)
from helpers.course.step_time import LinearStepCost


def one_second(work):
    """Every step takes one second, whatever it holds."""
    return 1.0


QUARTER_PER_TOKEN = LinearStepCost(0.0, 0.25)  # a step costs 0.25 s per new token: exact in binary


def two_decodes_and_a_long_prompt() -> list[Request]:
    """A and B (prompt 1, 4 tokens) arrive at 0; C (prompt 10, 2 tokens) at 0.5."""
    return [Request(0, 0.0, 1, 4), Request(1, 0.0, 1, 4), Request(2, 0.5, 10, 2)]


def run(policy: str, cost=one_second, **kwargs):
    scheduler = "chunked" if policy == "fifo" else "prefill_first"
    return simulate(two_decodes_and_a_long_prompt(), cost, scheduler, max_batch=3, max_tokens_per_step=4, **kwargs)


# ------------------------------------------------------------------------------ prefill_first against fifo


def test_fifo_by_hand_constant_cost():
    # budget 4. step 0-1: A 1 + B 1 (prompts). C arrives. Steps 1-2, 2-3, 3-4: A 1, B 1, C 2 (C at 2, 4, 6 of 10);
    # A and B finish at 4. Step 4-5: C's last 4, first token at 5. Step 5-6: C decodes.
    sim = run("fifo")
    assert [s.token_times for s in sim.served] == [[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [5.0, 6.0]]
    assert sim.steps["tokens"].tolist() == [2, 4, 4, 4, 4, 1]
    assert sim.steps["prefill_tokens"].tolist() == [2, 2, 2, 2, 4, 0]


def test_prefill_first_by_hand_constant_cost():
    # step 0-1: A 1 + B 1. Step 1-2: C has nothing prefilled yet, so decodes go first: A 1, B 1, C 2.
    # Steps 2-3, 3-4: C is split, so it goes first and its 8 left fill the budget twice: A and B stall.
    # C's first token at 4. Step 4-5: A, B, C decode (C done). Step 5-6: A, B.
    sim = run("prefill_first", trace=True)
    assert [s.token_times for s in sim.served] == [[1.0, 2.0, 5.0, 6.0], [1.0, 2.0, 5.0, 6.0], [4.0, 5.0]]
    assert sim.steps["tokens"].tolist() == [2, 4, 4, 4, 3, 2]
    assert sim.steps["prefill_tokens"].tolist() == [2, 2, 4, 4, 0, 0]
    stalled = sim.trace[sim.trace["state"] == "stalled"]
    assert list(zip(stalled["step"], stalled["id"], strict=True)) == [(2, 0), (2, 1), (3, 0), (3, 1)]


def test_prefill_first_trades_decode_gaps_for_ttft():
    fifo, first = run("fifo").requests_table(), run("prefill_first").requests_table()
    assert fifo["ttft_s"].tolist() == [1.0, 1.0, 4.5] and first["ttft_s"].tolist() == [1.0, 1.0, 3.5]
    assert max(run("fifo").served[0].itl) == 1.0 and max(run("prefill_first").served[0].itl) == 3.0


def test_both_orders_by_hand_linear_cost():
    # 0.25 s a token. fifo: 0-0.5 (2 tokens), C arrives at 0.5; then 4-token steps to 1.5, 2.5, 3.5 (A, B done),
    # C's last 4 to 4.5 (first token), C's decode to 4.75.
    fifo = run("fifo", QUARTER_PER_TOKEN)
    assert [s.token_times for s in fifo.served] == [[0.5, 1.5, 2.5, 3.5], [0.5, 1.5, 2.5, 3.5], [4.5, 4.75]]
    # prefill_first: 0-0.5, 0.5-1.5 (A, B, C 2), C 4 to 2.5, C 4 to 3.5 (first token), A B C 3 tokens to 4.25,
    # A B 2 tokens to 4.75.
    first = run("prefill_first", QUARTER_PER_TOKEN)
    assert [s.token_times for s in first.served] == [[0.5, 1.5, 4.25, 4.75], [0.5, 1.5, 4.25, 4.75], [3.5, 4.25]]


def test_schedule_plans_in_each_order():
    limits = Limits(max_batch=3, max_tokens_per_step=4)
    a, b, c = (Seq(r) for r in two_decodes_and_a_long_prompt())
    a.prefilled, b.prefilled, c.prefilled = 1, 1, 2  # A and B decode; C has 8 of its 10 prompt tokens left
    assert [(s.request.id, n) for s, n in schedule(_queue(a, b, c), _queue(), limits)] == [(0, 1), (1, 1), (2, 2)]
    plan = schedule(_queue(a, b, c), _queue(), limits, "prefill_first")
    assert [(s.request.id, n) for s, n in plan] == [(2, 4)]
    with pytest.raises(ValueError, match="policy must be one of"):
        schedule(_queue(a), _queue(), limits, "lifo")


def _queue(*seqs):
    from collections import deque

    return deque(seqs)


@pytest.mark.parametrize("scheduler", ["chunked", "prefill_first"])
def test_every_request_is_served_once_under_both_orders(scheduler):
    requests = poisson_requests(40, rate=30.0, prompt_len=64, output_len=12, seed=4)
    sim = simulate(requests, LinearStepCost(0.01, 1e-4, 1e-6), scheduler, max_batch=8, kv_capacity=1000,
                   max_tokens_per_step=48)
    check_conservation(requests, sim)
    assert sim.steps["tokens"].max() <= 48
    assert sim.steps["tokens"].sum() == sum(r.prompt_len + r.output_len - 1 for r in requests)


def test_prefill_first_takes_the_default_budget_and_continuous_still_refuses_one():
    sim = simulate([Request(0, 0.0, 600, 2)], one_second, "prefill_first")
    assert sim.steps["tokens"].tolist() == [512, 88, 1]  # max(512, max_batch=64) tokens a step
    with pytest.raises(ValueError, match="only applies"):
        simulate([Request(0, 0.0, 6, 2)], one_second, "continuous", max_tokens_per_step=64)


# ------------------------------------------------------------------------------------------------- goodput


def served_by_hand() -> list[Served]:
    """TTFT, TPOT, E2EL: 0 -> 1, 1, 3; 1 -> 2, 0 (one token), 2; 2 -> 1, 2, 3; 3 failed. Duration 0 to 5."""
    return [Served(Request(0, 0.0, 4, 3), [1.0, 2.0, 3.0]), Served(Request(1, 1.0, 4, 1), [3.0]),
            Served(Request(2, 2.0, 4, 2), [3.0, 5.0]), Served(Request(3, 2.0, 4, 2), [], error="timeout")]


def test_goodput_all_good():
    g = goodput(served_by_hand()[:3], ttft_s=2.0)  # TTFT 2.0 <= 2.0 counts as met
    assert (g["good"], g["completed"], g["failed"], g["duration_s"]) == (3, 3, 0, 5.0)
    assert g["goodput"] == pytest.approx(3 / 5) and g["good_share"] == 1.0


def test_goodput_one_misses_its_ttft_and_one_failed():
    g = goodput(served_by_hand(), ttft_s=1.5)
    assert (g["good"], g["completed"], g["failed"]) == (2, 3, 1)
    assert g["goodput"] == pytest.approx(2 / 5) and g["good_share"] == pytest.approx(2 / 4)


def test_goodput_tpot_of_a_single_token_is_zero_and_every_slo_must_hold():
    assert goodput(served_by_hand(), tpot_s=1.0)["good"] == 2  # 0 (TPOT 1) and 1 (TPOT 0); 2 has TPOT 2
    g = goodput(served_by_hand(), ttft_s=2.0, tpot_s=1.0, e2el_s=2.5)  # only 1 meets all three
    assert (g["good"], g["goodput"], g["good_share"]) == (1, pytest.approx(1 / 5), pytest.approx(1 / 4))


def test_goodput_never_counts_a_failed_request_with_tokens():
    served = [Served(Request(0, 0.0, 4, 1), [1.0]), Served(Request(1, 0.0, 4, 1), [1.0], error="cut off")]
    g = goodput(served, e2el_s=10.0)
    assert (g["good"], g["completed"], g["failed"], g["good_share"]) == (1, 1, 1, 0.5)


@pytest.mark.parametrize("kwargs, message", [
    ({}, "at least one SLO"), ({"ttft_s": 0.0}, "ttft_s must be a number > 0"), ({"tpot_s": -1.0}, "tpot_s"),
    ({"e2el_s": math.nan}, "e2el_s"),
])
def test_goodput_rejects_bad_slos(kwargs, message):
    with pytest.raises(ValueError, match=message):
        goodput(served_by_hand(), **kwargs)


def test_goodput_needs_a_completed_request_and_is_exported():
    with pytest.raises(ValueError, match="no request produced a token"):
        goodput([Served(Request(0, 0.0, 4, 2), [], error="timeout")], ttft_s=1.0)
    assert helpers.goodput is goodput and "goodput" in helpers.__all__


# ------------------------------------------------------------------------------------------ disaggregation


def test_kv_transfer_s_by_hand():
    assert kv_transfer_s(8, 4.0, 16.0, 0.5) == 2.5  # 0.5 s + 8 tokens x 4 B / 16 B/s
    assert kv_transfer_s(8, 4.0, math.inf) == 0.0


@pytest.mark.parametrize("args, message", [
    ((0, 4.0, 16.0), "prompt_len must be an integer >= 1"),
    ((8, 0.0, 16.0), "kv_bytes_per_token must be a number > 0"),
    ((8, 4.0, 0.0), "link_bytes_per_s must be a number > 0"),
    ((8, 4.0, 16.0, -1.0), "link_latency_s must be a number >= 0"),
])
def test_kv_transfer_s_rejects_bad_input(args, message):
    with pytest.raises(ValueError, match=message):
        kv_transfer_s(*args)


def two_at_once(link_bytes_per_s: float = 2.0, decode_cost=one_second):
    """Two requests (prompt 4, 3 tokens) at 0; 1 B of KV a token, so a transfer takes 4 / link_bytes_per_s."""
    requests = [Request(0, 0.0, 4, 3), Request(1, 0.0, 4, 3)]
    return requests, simulate_disaggregated(requests, one_second, decode_cost, 1.0, link_bytes_per_s)


def test_one_link_first_come_first_served():
    # both prefilled together in 0-1; 0's KV crosses 1-3; 1's is ready at 1 but waits for the link: 3-5
    _, run = two_at_once()
    expected = pd.DataFrame({"id": [0, 1], "ready_s": [1.0, 1.0], "start_s": [1.0, 3.0], "seconds": [2.0, 2.0],
                             "end_s": [3.0, 5.0]})
    pd.testing.assert_frame_equal(run.transfers, expected)


def test_disaggregated_token_times_by_hand():
    # decode side: 0 lands at 3, decodes 3-4, 4-5; 1 lands at 5, decodes 5-6, 6-7
    requests, run = two_at_once()
    assert [s.token_times for s in run.served] == [[1.0, 4.0, 5.0], [1.0, 6.0, 7.0]]
    assert [s.request for s in run.served] == requests  # the original requests, arrivals as sent
    assert [s.ttft for s in run.served] == [s.token_times[0] for s in run.prefill.served] == [1.0, 1.0]
    for s, end in zip(run.served, run.transfers["end_s"], strict=True):
        assert s.token_times[1] > end  # no decode token before its KV has landed
    check_conservation(requests, run)  # run.served is all it reads


def test_decode_side_continues_the_context_where_prefill_left_it():
    # colocated: prefill (4 new, context 4), then (1, 5) feeding token 1, (1, 6) feeding token 2
    seen = []

    def recording(work):
        seen.append(list(work))
        return 1.0

    simulate_disaggregated([Request(0, 0.0, 4, 3)], one_second, recording, 1.0, 4.0)
    assert seen == [[(1, 5)], [(1, 6)]]
    seen.clear()
    simulate([Request(0, 0.0, 4, 3)], recording)
    assert seen == [[(4, 4)], [(1, 5)], [(1, 6)]]


def test_a_slow_link_stretches_the_first_gap_not_ttft():
    # fast: KV crosses 1-2 (4 B at 4 B/s), tokens at 1, 3, 4. Slow (1/64 B/s): 1-257, tokens at 1, 258, 259.
    fast = simulate_disaggregated([Request(0, 0.0, 4, 3)], one_second, one_second, 1.0, 4.0).served[0]
    slow = simulate_disaggregated([Request(0, 0.0, 4, 3)], one_second, one_second, 1.0, 1 / 64).served[0]
    assert fast.token_times == [1.0, 3.0, 4.0] and slow.token_times == [1.0, 258.0, 259.0]
    assert fast.ttft == slow.ttft == 1.0
    assert (fast.itl, slow.itl) == ([2.0, 1.0], [257.0, 1.0])
    assert (fast.tpot, slow.tpot) == (1.5, 129.0)  # TPOT grows by the extra transfer time / (tokens - 1)


def test_one_token_requests_never_reach_the_decode_side():
    run = simulate_disaggregated([Request(0, 0.0, 4, 1), Request(1, 0.0, 4, 2)], one_second, one_second, 1.0, 4.0)
    assert run.transfers["id"].tolist() == [1]
    assert [s.token_times for s in run.served] == [[1.0], [1.0, 3.0]]  # 1's KV crosses 1-2, decodes 2-3
    alone = simulate_disaggregated([Request(0, 0.0, 4, 1)], one_second, one_second, 1.0, 4.0)
    assert alone.decode is None and alone.transfers.empty and alone.served[0].token_times == [1.0]


def test_chunked_prefill_side_and_latency():
    # budget 4: the 10-token prompt takes 0-1, 1-2, 2-3; KV 10 B at 10 B/s + 0.5 s latency crosses 3-4.5
    run = simulate_disaggregated([Request(0, 0.0, 10, 2)], one_second, one_second, 1.0, 10.0, link_latency_s=0.5,
                                 max_batch=4, max_tokens_per_step=4)
    assert run.prefill.steps["tokens"].tolist() == [4, 4, 2]
    assert run.served[0].token_times == [3.0, 5.5]


def test_disaggregated_conserves_a_poisson_stream():
    requests = poisson_requests(30, rate=20.0, prompt_len=64, output_len=8, seed=5)
    cost = LinearStepCost(0.01, 1e-4, 1e-6)
    run = simulate_disaggregated(requests, cost, cost, 2048.0, 1e8, link_latency_s=1e-3, max_batch=8)
    check_conservation(requests, run)
    assert (run.decode.steps["prefill_tokens"] == 0).all()  # the decode side never prefills
    assert (run.transfers["start_s"] >= run.transfers["ready_s"]).all()
    assert (run.transfers["start_s"].iloc[1:].to_numpy() >= run.transfers["end_s"].iloc[:-1].to_numpy()).all()


def test_disaggregated_rejects_bad_input():
    with pytest.raises(ValueError, match="output_len"):
        simulate_disaggregated([Request(0, 0.0, 4, 0)], one_second, one_second, 1.0, 4.0)
    with pytest.raises(ValueError, match="link_bytes_per_s"):
        simulate_disaggregated([Request(0, 0.0, 4, 2)], one_second, one_second, 1.0, 0.0)
    with pytest.raises(ValueError, match="prefilled=True needs"):
        simulate([Request(0, 0.0, 4, 2)], one_second, "static", prefilled=True)


def test_simulate_replicas_deals_round_robin_and_merges_by_id():
    # four at 0, one sequence per instance. Alone: 0-2, 2-4, 4-6, 6-8. Two replicas: {0, 2} and {1, 3}.
    requests = [Request(i, 0.0, 2, 2) for i in range(4)]
    one = simulate_replicas(requests, one_second, 1, max_batch=1)
    two = simulate_replicas(requests, one_second, 2, max_batch=1)
    assert [s.token_times for s in one] == [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]
    assert [s.token_times for s in two] == [[1.0, 2.0], [1.0, 2.0], [3.0, 4.0], [3.0, 4.0]]
    assert [s.request.id for s in simulate_replicas(requests, one_second, 8)] == [0, 1, 2, 3]


def test_simulate_replicas_deals_by_arrival_not_id():
    # ids 0, 2, 1, 3 arrive at 0, 0.25, 0.5, 0.75: replica 0 gets ids 0 and 1, replica 1 ids 2 and 3
    # (dealt by id, replica 0 would get 0 and 2, and id 2 would finish at 4)
    requests = [Request(0, 0.0, 2, 2), Request(1, 0.5, 2, 2), Request(2, 0.25, 2, 2), Request(3, 0.75, 2, 2)]
    served = simulate_replicas(requests, one_second, 2, scheduler="continuous", max_batch=1)
    assert [s.token_times for s in served] == [[1.0, 2.0], [3.0, 4.0], [1.25, 2.25], [3.25, 4.25]]


@pytest.mark.parametrize("args, message", [
    (([Request(0, 0.0, 2, 2)], 0), "n_replicas"), (([], 2), "empty"),
    (([Request(0, 0.0, 2, 2), Request(0, 1.0, 2, 2)], 2), "unique"),
])
def test_simulate_replicas_rejects_bad_input(args, message):
    requests, n = args
    with pytest.raises(ValueError, match=message):
        simulate_replicas(requests, one_second, n)
