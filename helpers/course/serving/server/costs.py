"""Chapter 6, what a real server adds to its engine's steps, probed on the running server.

An engine step cost prices the forward passes and the engine's own work between them. Over HTTP two more
costs appear, and both are measured here on shapes that no judged run uses:

- per request (`request_s`): a one-token request sent alone waits longer for its token than the engine's
  prefill step takes: the HTTP request, tokenising, handing it to the engine, and the chunk's way back.
  It delays the request's first step.
- per streamed token (`chunk_s`): the server's HTTP thread formats and sends one chunk per sequence per step,
  and this client reads it. That is CPU time, measured as such (the server's main thread, from
  /proc/<pid>/task/<tid>/schedstat, plus this process): the server's torch threads already fill the seat's
  cores, so it is taken from the engine's steps, once per sequence in each step.

`simulate_server` runs chapter 5's simulator with both: arrivals reach the engine `request_s` late, and every
step costs `chunk_s` more per sequence in it; times are then counted from the request's real arrival.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median

from ....plumbing.validate import positive, positive_int
from ...step_time import StepCost, Work
from ..requests import Request, Served, poisson_requests
from ..simulator.simulation import Simulation, simulate
from .client import benchmark_server


def thread_cpu_s(pid: int, tid: int | None = None) -> float | None:
    """CPU seconds a thread has run (its process's main thread unless `tid`), or None where Linux's
    per-thread schedstat (nanoseconds) is not available."""
    try:
        return int(Path(f"/proc/{pid}/task/{tid or pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class ServerCosts:
    """What the server adds to the engine's steps, and the measurements it comes from."""

    request_s: float  # per request, before its first step: HTTP, tokenising, hand-over, the first chunk back
    chunk_s: float  # CPU seconds per streamed token (server's HTTP thread and this client), taken from the steps
    single_ttfts_s: tuple[float, ...]  # one-token requests sent alone, over HTTP
    prefill_s: float  # the engine cost's price for one of their prefills
    stream_cpu_s: float | None  # CPU of the server's main thread and this client over the streaming probe
    streamed_tokens: int

    def describe(self) -> str:
        per_chunk = ("not measured (no per-thread CPU times here): 0" if self.stream_cpu_s is None
                     else f"{self.chunk_s * 1e6:.0f} µs")
        ttft = median(self.single_ttfts_s)
        # a TTFT under its prefill's price leaves nothing per request: the engine cost priced that prefill high
        floor = (f", {(self.prefill_s - ttft) * 1e3:.1f} ms under its prefill's price, so 0" if ttft < self.prefill_s
                 else "")
        return (f"per request {self.request_s * 1e3:.1f} ms (one-token request alone: TTFT "
                f"{ttft * 1e3:.1f} ms over HTTP, its prefill {self.prefill_s * 1e3:.1f} ms at the engine's "
                f"cost{floor}); per streamed token {per_chunk} "
                f"({self.streamed_tokens} tokens streamed)")


def probe_server_costs(server, engine_cost: StepCost, prompt_len: int, singles: int = 5,
                       streams: int = 4, stream_len: int = 64) -> ServerCosts:
    """Measure `ServerCosts` on a running `server` (`serve_model`'s): `singles` one-token requests of
    `prompt_len` tokens, one at a time, then `streams` requests of `stream_len` tokens sent at once, with the
    CPU time of the server's main thread (its `pid`) and of this process."""
    for name, value in (("prompt_len", prompt_len), ("singles", singles), ("streams", streams),
                        ("stream_len", stream_len)):
        positive_int(name, value)
    lone = [benchmark_server(server.url, server.model, [r], check=False)[0]
            for r in poisson_requests(singles, float("inf"), prompt_len, 1, range_ratio=0.0, seed=1)]
    failed = [s.error for s in lone if not s.ok]
    if failed:
        raise RuntimeError(f"{len(failed)} of {singles} probe requests failed: {failed[0]}")
    ttfts = tuple(s.ttft for s in lone)
    prefill_s = float(engine_cost([(prompt_len, prompt_len)]))

    pid = getattr(server, "pid", None)
    together = poisson_requests(streams, float("inf"), prompt_len, stream_len, range_ratio=0.0, seed=2)
    server_before, own_before = (thread_cpu_s(pid) if pid else None), time.process_time()
    served = benchmark_server(server.url, server.model, together, check=False)
    server_after, own_after = (thread_cpu_s(pid) if pid else None), time.process_time()
    tokens = sum(len(s.token_times) for s in served)
    if server_before is None or server_after is None:
        stream_cpu, chunk_s = None, 0.0
    else:
        stream_cpu = (server_after - server_before) + (own_after - own_before)
        chunk_s = stream_cpu / max(tokens, 1)
    return ServerCosts(max(0.0, median(ttfts) - prefill_s), chunk_s, ttfts, prefill_s, stream_cpu, tokens)


@dataclass(frozen=True)
class StreamingStepCost:
    """An engine step cost plus the server's streaming CPU (`chunk_s` for every sequence in the step), all
    times `slowdown`."""

    engine: StepCost
    chunk_s: float
    slowdown: float = 1.0

    def __call__(self, work: Work) -> float:
        return self.slowdown * (float(self.engine(work)) + self.chunk_s * len(work))


def simulate_server(requests: list[Request], engine_cost: StepCost, costs: ServerCosts,
                    scheduler: str = "continuous", slowdown: float = 1.0, **limits) -> Simulation:
    """Chapter 5's simulator for a server: each request reaches the engine `costs.request_s` after it is sent,
    every step pays `costs.chunk_s` per sequence; TTFT, TPOT and E2EL count from when it was sent.

    `slowdown` multiplies every cost: the machine's speed when the costs were measured over its speed during
    the run (a reference timing's ratio, run over fit), for a machine whose speed moves."""
    positive("slowdown", slowdown)
    late = [replace(r, arrival=r.arrival + slowdown * costs.request_s) for r in requests]
    sim = simulate(late, StreamingStepCost(engine_cost, costs.chunk_s, slowdown), scheduler, **limits)
    sent = {r.id: r for r in requests}
    return replace(sim, served=[Served(sent[s.request.id], s.token_times, s.error) for s in sim.served])
