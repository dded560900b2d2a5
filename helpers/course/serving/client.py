"""Chapter 5, a client for a real OpenAI-compatible server: replay requests and time every streamed chunk."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Sequence

from .requests import Request, Served


def stream_completion(url: str, model: str, prompt: str, max_tokens: int, timeout: float = 600.0) -> list[float]:
    """Send one streaming /v1/completions request to an OpenAI-compatible server; seconds of each chunk."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True,
                       "ignore_eos": True, "temperature": 0.0}).encode()
    request = urllib.request.Request(url.rstrip("/") + "/v1/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    times: list[float] = []
    with urllib.request.urlopen(request, timeout=timeout) as response:
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[len("data:"):])
            if chunk.get("choices") and chunk["choices"][0].get("text"):
                times.append(time.perf_counter() - start)
    return times


def benchmark_server(url: str, model: str, requests: Sequence[Request], timeout: float = 600.0) -> list[Served]:
    """Replay `requests` (arrival times, lengths) against a running server, one thread per request."""
    from concurrent.futures import ThreadPoolExecutor

    def send(r: Request) -> Served:
        time.sleep(max(0.0, start + r.arrival - time.perf_counter()))
        sent = time.perf_counter() - start
        times = stream_completion(url, model, "hi " * r.prompt_len, r.output_len, timeout)  # ~1 token per word
        return Served(Request(r.id, sent, r.prompt_len, r.output_len), [sent + t for t in times])

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=min(256, len(requests))) as pool:
        return list(pool.map(send, requests))
