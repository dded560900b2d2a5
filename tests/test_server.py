"""A real `transformers serve` on loopback, measured with the lab's client: exact token counts, metrics, failures.

The model is tiny with random weights, saved without an end-of-sequence id so every request generates exactly
the tokens it asks for (vLLM's ignore_eos, without a non-standard field). A stub server on loopback plays the
misbehaving server: a stream that stalls, one without usage, one that bundles tokens in a chunk."""

from __future__ import annotations

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from transformers import AutoConfig

import helpers
from helpers.course.serving.server import free_port, save_model_folder, serve_model
from helpers.course.serving.server.client import (
    SERVERS,
    ServerError,
    _payload,
    check_server,
    stream_completion,
    token_stamps,
)
from helpers.plumbing.models import random_model
from helpers.plumbing.tokenizer import offline_tokenizer

N_POSITIONS = 128  # small on purpose: a request that runs past it breaks off mid-stream
STANDARD_FIELDS = {"model", "prompt", "messages", "max_tokens", "max_completion_tokens", "stream", "stream_options",
                   "temperature"}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A 2-layer GPT-2-style model with random weights and the offline tokenizer, saved as a model folder."""
    tokenizer = offline_tokenizer(4096)
    config = AutoConfig.for_model("gpt2", n_embd=64, n_layer=2, n_head=2, n_positions=N_POSITIONS, vocab_size=4096,
                                  bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    return save_model_folder(tmp_path_factory.mktemp("tiny"), random_model(config, device="cpu"), tokenizer)


def run_scenario(model_dir, continuous_batching: bool) -> dict:
    """Start a server, replay requests, then break one mid-stream (last: it may take the engine down)."""
    found: dict = {}
    t0 = time.perf_counter()
    paged_kv = dict(block_size=16, num_blocks=64) if continuous_batching else {}
    with serve_model(model_dir, continuous_batching=continuous_batching, **paged_kv) as server:
        found["server"] = server
        found["requests"] = helpers.poisson_requests(6, rate=50.0, prompt_len=12, output_len=24, seed=1)
        t1 = time.perf_counter()
        found["served"] = helpers.benchmark_server(server.url, server.model, found["requests"], timeout=60)
        found["wall_s"] = time.perf_counter() - t1
        found["listed"] = helpers.check_server(server.url)  # transformers 5.17 lists its Hub cache only: none here
        if found["listed"]:
            with pytest.raises(ValueError) as unknown:
                helpers.benchmark_server(server.url, "no-such-model", found["requests"])
            found["unknown"] = str(unknown.value)
        found["refused"] = helpers.benchmark_server(server.url, "no-such-model", found["requests"][:1], check=False)
        too_long = helpers.Request(99, 0.0, 12, 2 * N_POSITIONS)  # runs past the model's positions
        found["broken"] = helpers.benchmark_server(server.url, server.model, [too_long], timeout=60)
    found["total_s"] = time.perf_counter() - t0
    with pytest.raises(ConnectionError):
        check_server(server.url, server.model, timeout=2)  # the server is gone
    return found


@pytest.fixture(scope="module", params=[True, False], ids=["continuous-batching", "static"])
def scenario(request, model_dir):
    return run_scenario(model_dir, request.param)


def test_every_request_has_exactly_its_tokens(scenario):
    served, requests = scenario["served"], scenario["requests"]
    assert [s.request.id for s in served] == [r.id for r in requests]
    for s, r in zip(served, requests, strict=True):
        assert s.ok, s.error
        assert len(s.token_times) == r.output_len, f"request {r.id}: {len(s.token_times)} of {r.output_len}"
        assert s.request.prompt_len == r.prompt_len  # the server's own count of the prompt: one token a word
        assert s.token_times[0] > s.request.arrival
        assert np.all(np.diff(s.token_times) >= 0)


def test_metrics_agree_with_the_run(scenario):
    served, wall_s = scenario["served"], scenario["wall_s"]
    m = helpers.serving_metrics(served)
    assert (m["completed"], m["failed"]) == (len(served), 0)
    assert m["output_throughput"] * m["duration_s"] == pytest.approx(sum(s.request.output_len for s in served))
    assert 0 < m["duration_s"] <= wall_s  # measured inside the run, by a clock it does not share
    assert m["ttft_p50_s"] <= m["e2el_p50_s"] <= wall_s
    for s in served:  # vLLM's TPOT: (E2EL - TTFT) / (tokens - 1), from the server's token count
        assert s.tpot == pytest.approx((s.e2el - s.ttft) / (s.request.output_len - 1))
    assert len([g for s in served for g in s.itl]) == sum(s.request.output_len - 1 for s in served)


def test_a_request_broken_mid_stream_is_kept_and_counted(scenario):
    (broken,) = scenario["broken"]
    assert not broken.ok and "broke off" in broken.error
    assert 0 < len(broken.token_times) < broken.request.output_len  # what came before the break is kept
    m = helpers.serving_metrics(scenario["served"] + scenario["broken"])
    assert (m["completed"], m["failed"]) == (len(scenario["served"]), 1)


def test_unknown_model_and_refused_request_are_clear(scenario):
    if scenario["listed"]:  # a server that lists its models: the client names the unknown one before sending
        assert "no-such-model" in scenario["unknown"] and scenario["server"].model in scenario["unknown"]
    (refused,) = scenario["refused"]
    assert not refused.ok and "HTTP 400" in refused.error and not refused.token_times


def test_server_starts_and_warms_up_in_time(scenario):
    server = scenario["server"]
    assert server.url.startswith("http://127.0.0.1:")
    assert 0 < server.start_s < 120 and 0 < server.warmup_s < 120
    print(f"start {server.start_s:.1f} s, warm-up {server.warmup_s:.2f} s, scenario {scenario['total_s']:.1f} s")


def test_dead_url_fails_fast_naming_it():
    url = f"http://127.0.0.1:{free_port()}"
    t0 = time.perf_counter()
    with pytest.raises(ConnectionError, match=url.replace(".", r"\.")):
        helpers.benchmark_server(url, "any", helpers.poisson_requests(2, rate=1.0))
    assert time.perf_counter() - t0 < 5


def test_folder_without_a_model_fails_before_starting(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"), serve_model(tmp_path):
        pass


@pytest.mark.parametrize("kwargs, name", [(dict(n=0, rate=1.0), "n"), (dict(n=2, rate=0.0), "rate"),
                                          (dict(n=2, rate=-1.0), "rate"), (dict(n=2, rate=1.0, prompt_len=0),
                                                                           "prompt_len"),
                                          (dict(n=2, rate=1.0, output_len=0), "output_len")])
def test_bad_workload_names_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=f"^{name} "):
        helpers.poisson_requests(**kwargs)


def test_only_standard_fields_unless_the_server_accepts_ignore_eos():
    for chat in (False, True):
        assert set(_payload("m", "hi", 4, "openai", chat)) <= STANDARD_FIELDS
        assert _payload("m", "hi", 4, "vllm", chat)["ignore_eos"] is True
        assert _payload("m", "hi", 4, "sglang", chat)["ignore_eos"] is True
    assert SERVERS == ("openai", "vllm", "sglang")
    with pytest.raises(ValueError, match="server"):
        _payload("m", "hi", 4, "tgi", False)


def test_token_stamps_one_per_token():
    assert token_stamps([1.0, 2.0, 3.0], [None] * 3, 3) == [1.0, 2.0, 3.0]
    assert token_stamps([1.0, 2.0], [1, 3], 4) == [1.0, 2.0, 2.0, 2.0]  # counts given: repeat the chunk's time
    stamps = token_stamps([1.0, 1.1, 2.1], [None] * 3, 7)  # 4 tokens unaccounted for: most after the long gap
    assert len(stamps) == 7 and stamps[0] == 1.0 and stamps.count(2.1) > stamps.count(1.1)
    with pytest.raises(ValueError):
        token_stamps([1.0, 2.0, 3.0], [None] * 3, 2)  # more token chunks than tokens: the count is wrong


class _Stub(BaseHTTPRequestHandler):
    """A misbehaving OpenAI-compatible server; `mode` picks how it misbehaves."""

    mode = "stall"

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def do_GET(self):
        self._send(200, json.dumps({"data": [{"id": "stub"}]}).encode())

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        chunk = {"choices": [{"text": "a b", "index": 0, "logprobs": {"tokens": ["a", " b"]}}]}
        done = {"choices": [{"text": "", "index": 0, "finish_reason": "length"}]}
        usage = {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
        events = {"stall": [chunk], "no-usage": [{"choices": [{"text": "a", "index": 0}]}, done],
                  "bundled": [chunk, done, usage]}[self.mode]
        self._send(200, b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events), "text/event-stream")
        if self.mode == "stall":
            time.sleep(3)
        else:
            self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def stub():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Stub)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_stalled_stream_times_out_and_is_counted(stub):
    _Stub.mode = "stall"
    t0 = time.perf_counter()
    (s,) = helpers.benchmark_server(stub, "stub", [helpers.Request(0, 0.0, 3, 8)], timeout=0.5)
    assert time.perf_counter() - t0 < 2.5
    assert not s.ok and "within 0.5 s" in s.error and len(s.token_times) == 1
    with pytest.raises(ValueError, match="1 failed"):
        helpers.serving_metrics([s])


def test_no_usage_means_no_count(stub):
    _Stub.mode = "no-usage"
    with pytest.raises(ServerError, match="usage"):
        stream_completion(stub, "stub", "hi", 2)


def test_a_chunk_of_two_tokens_gets_two_stamps(stub):
    _Stub.mode = "bundled"
    stamps = stream_completion(stub, "stub", "hi", 2)
    assert len(stamps) == 2 and stamps[0] == stamps[1] and not math.isnan(stamps[0])
