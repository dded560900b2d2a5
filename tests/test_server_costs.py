"""What a server adds to its engine's steps: the simulator's arithmetic with those costs, the per-thread CPU
counter it rests on, and the probe against a real `transformers serve` on loopback."""

from __future__ import annotations

import os
import time

import pytest
from transformers import AutoConfig

from helpers.course.serving.requests import Request
from helpers.course.serving.server import (
    ServerCosts,
    probe_server_costs,
    save_model_folder,
    serve_model,
    simulate_server,
    thread_cpu_s,
)
from helpers.course.serving.simulator import simulate
from helpers.course.step_time import LinearStepCost
from helpers.plumbing.models import random_model
from helpers.plumbing.tokenizer import offline_tokenizer

ENGINE = LinearStepCost(fixed_s=0.002, per_token_s=0.0001)
COSTS = ServerCosts(request_s=0.010, chunk_s=0.0005, single_ttfts_s=(0.0,), prefill_s=0.0, stream_cpu_s=0.0,
                    streamed_tokens=0)


def test_a_lone_request_pays_the_request_cost_once_and_the_chunk_cost_every_step():
    """Course arithmetic: TTFT = request + prefill step + one chunk; TPOT = decode step + one chunk."""
    alone = Request(0, arrival=1.0, prompt_len=20, output_len=5)
    served = simulate_server([alone], ENGINE, COSTS).served[0]
    assert served.request == alone  # counted from when it was sent, not when the engine saw it
    assert served.ttft == pytest.approx(0.010 + 0.002 + 20 * 0.0001 + 0.0005)
    assert served.tpot == pytest.approx(0.002 + 0.0001 + 0.0005)


def test_chunks_are_paid_per_sequence_in_the_step():
    together = [Request(i, 0.0, 10, 4) for i in range(4)]
    with_server = simulate_server(together, ENGINE, COSTS, max_batch=4)
    alone = simulate(together, ENGINE, "continuous", max_batch=4)
    decode_steps = with_server.steps[with_server.steps.prefill_tokens == 0]
    assert (decode_steps.seconds - (0.002 + 4 * 0.0001 + 4 * 0.0005)).abs().max() < 1e-12
    assert with_server.served[0].tpot - alone.served[0].tpot == pytest.approx(4 * 0.0005)


def test_thread_cpu_counts_this_threads_work():
    before = thread_cpu_s(os.getpid())
    if before is None:
        pytest.skip("no per-thread schedstat on this system")
    t0 = time.process_time()
    while time.process_time() - t0 < 0.2:
        pass
    assert thread_cpu_s(os.getpid()) - before == pytest.approx(0.2, abs=0.05)
    assert thread_cpu_s(2 ** 22 + 1) is None  # no such process


def test_probe_on_a_real_server(tmp_path):
    tokenizer = offline_tokenizer(4096)
    config = AutoConfig.for_model("gpt2", n_embd=64, n_layer=2, n_head=2, n_positions=128, vocab_size=4096,
                                  bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    folder = save_model_folder(tmp_path, random_model(config, device="cpu"), tokenizer)
    with serve_model(folder, block_size=16, num_blocks=64) as server:
        costs = probe_server_costs(server, ENGINE, prompt_len=12, singles=3, streams=2, stream_len=24)
    assert costs.streamed_tokens == 2 * 24
    assert len(costs.single_ttfts_s) == 3 and min(costs.single_ttfts_s) > 0
    assert costs.request_s >= 0
    if thread_cpu_s(os.getpid()) is not None:
        # every token is formatted by the server and parsed here: some CPU per token, far below a second
        assert 0 < costs.chunk_s < 0.05
    with pytest.raises(ValueError, match="stream_len"):
        probe_server_costs(server, ENGINE, prompt_len=12, stream_len=0)


def test_a_slower_machine_scales_every_cost():
    alone = Request(0, arrival=0.0, prompt_len=20, output_len=5)
    base, slow = (simulate_server([alone], ENGINE, COSTS, slowdown=f).served[0] for f in (1.0, 1.5))
    assert slow.ttft == pytest.approx(1.5 * base.ttft) and slow.tpot == pytest.approx(1.5 * base.tpot)
    with pytest.raises(ValueError, match="slowdown"):
        simulate_server([alone], ENGINE, COSTS, slowdown=0)


def test_describe_says_when_the_ttft_fell_under_its_prefills_price():
    under = ServerCosts(0.0, 1e-4, [0.10, 0.12, 0.11], 0.13, 0.5, 100)
    assert "20.0 ms under its prefill's price, so 0" in under.describe()
    over = ServerCosts(0.02, 1e-4, [0.15], 0.13, 0.5, 100)
    assert "under" not in over.describe() and "per request 20.0 ms" in over.describe()
