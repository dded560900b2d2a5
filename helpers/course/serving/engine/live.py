"""Chapter 9, the engine with requests arriving over time: transformers' continuous-batching manager (the engine
behind `generate_batch` and `transformers serve --continuous-batching`) started in-process, each request added at
its arrival time, every token stamped by the engine as it is made, every forward pass recorded."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from ....plumbing.compat import paged_config
from ....plumbing.logs import quiet_logger
from ....plumbing.validate import one_of, positive_int
from ..requests import Request, Served
from .paged_run import StepRecorder

ENGINE_SCHEDULERS = ("fifo", "prefill_first")  # transformers' FIFOScheduler and PrefillFirstScheduler


@dataclass
class LiveRun:
    """One run: every request served (on the run's clock, s) and one row per forward pass the engine ran."""

    scheduler: str
    max_batch_tokens: int
    served: list[Served]
    steps: pd.DataFrame  # start_s, seconds, tokens, sequences, kv_tokens: every forward pass, on the same clock
    seconds: float


def engine_config(max_batch_tokens: int, scheduler: str, block_size: int, num_blocks: int):
    """A ContinuousBatchingConfig: `max_batch_tokens` tokens per step, one scheduler, no prefix sharing (every
    prompt is computed in full: the stalls measured are the prompts' own)."""
    positive_int("max_batch_tokens", max_batch_tokens)
    one_of("scheduler", scheduler, ENGINE_SCHEDULERS)
    return paged_config(block_size, num_blocks, max_batch_tokens=max_batch_tokens, scheduler_type=scheduler,
                        allow_block_sharing=False)


def _collect(manager, ids: list[str], timeout: float) -> dict[str, object]:
    """Wait for every request's final output (or the deadline): {request id: GenerationOutput}."""
    results, deadline = {}, time.perf_counter() + timeout
    while len(results) < len(ids) and time.perf_counter() < deadline:
        out = manager.get_result(timeout=0.1)
        if out is not None and out.is_finished():
            results[out.request_id] = out
    return results


def run_live(model, requests: Sequence[Request], prompts: Sequence[Sequence[int]], generation_config, *,
             max_batch_tokens: int, scheduler: str = "fifo", block_size: int = 32, num_blocks: int = 512,
             warmup: Sequence[Sequence[int]] = (), timeout: float = 120.0) -> LiveRun:
    """Serve `requests` (arrival times and output lengths; `prompts` their token ids) with the engine in-process.

    The engine starts, runs the `warmup` prompts (untimed), then each request is added at its arrival time; a
    token's time is the engine's own stamp when it made it. A request that fails or misses `timeout` keeps its
    error and counts. The engine is always stopped, also on error or interrupt."""
    if len(requests) != len(prompts):
        raise ValueError(f"requests and prompts must pair up: {len(requests)} requests, {len(prompts)} prompts")
    config = engine_config(max_batch_tokens, scheduler, block_size, num_blocks)
    with quiet_logger("ContinuousBatchingLogger"):
        manager = model.init_continuous_batching(generation_config=generation_config,
                                                 continuous_batching_config=config)
        manager.start()
        recorder = None
        try:
            warm = [manager.add_request(list(p), request_id=f"warmup-{i}", max_new_tokens=2)
                    for i, p in enumerate(warmup)]
            _collect(manager, warm, timeout)
            recorder = StepRecorder(model)
            order = sorted(range(len(requests)), key=lambda i: requests[i].arrival)
            start, sent = time.perf_counter(), {}
            for i in order:
                r = requests[i]
                time.sleep(max(0.0, start + r.arrival - time.perf_counter()))
                sent[i] = time.perf_counter() - start
                manager.add_request(list(prompts[i]), request_id=f"r{r.id}", max_new_tokens=r.output_len,
                                    record_timestamps=True)
            results = _collect(manager, [f"r{r.id}" for r in requests], timeout)
            seconds = time.perf_counter() - start
        finally:
            manager.stop(block=True, timeout=30)
            if recorder is not None:
                recorder.remove()
    served = []
    for i, r in enumerate(requests):
        out = results.get(f"r{r.id}")
        error = "no answer within the timeout" if out is None else (out.error or "")
        times = [t - start for t in (out.timestamps or [])] if out is not None else []
        served.append(Served(Request(r.id, sent[i], len(prompts[i]), r.output_len), times, error=error))
    steps = pd.DataFrame({"start_s": [t - start for t in recorder.starts], "seconds": recorder.seconds,
                          "tokens": recorder.tokens, "sequences": recorder.sequences,
                          "kv_tokens": recorder.kv_tokens})
    return LiveRun(scheduler, max_batch_tokens, served, steps[steps["start_s"] >= 0].reset_index(drop=True), seconds)
