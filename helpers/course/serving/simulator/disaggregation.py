"""Chapter 9, prefill meets decode: disaggregated prefill and decode, simulated, beside a fair colocated baseline.

One prefill instance runs every prompt and makes each request's first token. The prompt's KV then crosses one
link shared by all requests, first come first served, and a decode instance makes the other output_len - 1
tokens without prefilling again (`simulate(..., prefilled=True)`). The baseline is as many colocated instances,
each serving its share of the requests start to finish (`simulate_replicas`): two machines against two.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import pandas as pd

from ....plumbing.validate import positive_int
from ...hardware.links import kv_transfer_s
from ...step_time import StepCost
from ..requests import Request, Served
from .simulation import Simulation, simulate

TRANSFER_COLUMNS = ["id", "ready_s", "start_s", "seconds", "end_s"]


@dataclass
class DisaggregatedRun:
    """A disaggregated run: every request served, each instance's own run, and one row per KV transfer."""

    served: list[Served]  # one per request, by id: arrival as sent, the prefill side's first token, then the decodes
    prefill: Simulation  # every request with output_len 1: its prompt and first token
    decode: Simulation | None  # requests as the decode side sees them (prompt_len + 1 held); None if none went there
    transfers: pd.DataFrame  # TRANSFER_COLUMNS: id, ready_s, start_s, seconds, end_s


def _transfers(prefilled: Sequence[Served], seconds: Callable[[Request], float]) -> pd.DataFrame:
    """One link, first come first served: a prompt's KV leaves once its prefill is done and the link is free."""
    rows, free = [], 0.0
    for s in sorted(prefilled, key=lambda s: (s.token_times[0], s.request.id)):
        start, sec = max(s.token_times[0], free), seconds(s.request)
        free = start + sec
        rows.append((s.request.id, s.token_times[0], start, sec, free))
    return pd.DataFrame(rows, columns=TRANSFER_COLUMNS)


def simulate_disaggregated(requests: Sequence[Request], prefill_cost: StepCost, decode_cost: StepCost,
                           kv_bytes_per_token: float, link_bytes_per_s: float, link_latency_s: float = 0.0,
                           max_batch: int = 64, max_tokens_per_step: int | None = None) -> DisaggregatedRun:
    """Serve `requests` on a prefill instance (continuous, or chunked with a token budget) and a decode instance
    (continuous), joined by one link that carries each prompt's KV; a 1-token request never leaves the first."""
    kv_transfer_s(1, kv_bytes_per_token, link_bytes_per_s, link_latency_s)  # check the link's arguments up front
    for r in requests:
        positive_int(f"request {r.id}: output_len", r.output_len)
    scheduler = "continuous" if max_tokens_per_step is None else "chunked"
    prefill = simulate([replace(r, output_len=1) for r in requests], prefill_cost, scheduler, max_batch,
                       max_tokens_per_step=max_tokens_per_step)
    by_id = {r.id: r for r in requests}
    onward = [s for s in prefill.served if by_id[s.request.id].output_len > 1]
    transfers = _transfers(onward, lambda r: kv_transfer_s(r.prompt_len, kv_bytes_per_token, link_bytes_per_s,
                                                            link_latency_s))
    # the decode side holds prompt + first token; its first step feeds the first token (context prompt_len + 1)
    landed = [by_id[int(i)] for i in transfers["id"]]
    decode_requests = [Request(r.id, float(end), r.prompt_len + 1, r.output_len - 1)
                       for r, end in zip(landed, transfers["end_s"], strict=True)]
    decode = simulate(decode_requests, decode_cost, "continuous", max_batch, prefilled=True) if landed else None
    later = {s.request.id: s.token_times for s in decode.served} if decode else {}
    served = [Served(by_id[s.request.id], [s.token_times[0], *later.get(s.request.id, [])]) for s in prefill.served]
    return DisaggregatedRun(served, prefill, decode, transfers)


def simulate_replicas(requests: Sequence[Request], cost: StepCost, n_replicas: int, scheduler: str = "chunked",
                      **kwargs) -> list[Served]:
    """`n_replicas` identical colocated instances, requests dealt round-robin in arrival order; served by id."""
    positive_int("n_replicas", n_replicas)
    if not requests:
        raise ValueError("requests is empty")
    if len({r.id for r in requests}) != len(requests):
        raise ValueError("request ids must be unique")
    ordered = sorted(requests, key=lambda r: (r.arrival, r.id))
    shares = [ordered[i::n_replicas] for i in range(n_replicas)]
    served = [s for share in shares if share for s in simulate(share, cost, scheduler, **kwargs).served]
    return sorted(served, key=lambda s: s.request.id)
