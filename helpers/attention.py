"""Attention cost (chapter 3): FLOPs and bytes against sequence length, OOM-tolerant sweeps, slope fits."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import torch
from transformers import AutoConfig, PretrainedConfig

from .device import as_device
from .memory import free_memory, is_oom, measure_memory
from .timing import Timing, calls_per_round, format_seconds, time_once


def _positive(**values: float) -> None:
    """Raise a ValueError naming the first argument that is not > 0."""
    for name, value in values.items():
        if value <= 0:
            raise ValueError(f"{name} must be > 0, got {value!r}")


def attended_pairs(n_queries: int, n_context: int, causal: bool = False) -> int:
    """(query, key) pairs scored: all of them, or with a causal mask only keys at or before each query."""
    _positive(n_queries=n_queries, n_context=n_context)
    if not causal:
        return n_queries * n_context
    if n_queries > n_context:
        raise ValueError(f"n_queries ({n_queries}) cannot exceed n_context ({n_context}) under a causal mask")
    first = n_context - n_queries + 1  # the first new query sees the old context and itself
    return n_queries * (first + n_context) // 2


def score_flops(n_queries: int, n_context: int, n_heads: int, head_dim: int, causal: bool = False) -> int:
    """FLOPs of Q K^T and A V for one layer: 2 products x 2 FLOPs x heads x head_dim per scored pair."""
    _positive(n_heads=n_heads, head_dim=head_dim)
    return 4 * n_heads * head_dim * attended_pairs(n_queries, n_context, causal)


def score_matrix_bytes(n_queries: int, n_context: int, n_heads: int, bytes_per_elem: int, batch_size: int = 1) -> int:
    """Bytes of one materialised score matrix (batch x heads x queries x context)."""
    _positive(n_queries=n_queries, n_context=n_context, n_heads=n_heads, bytes_per_elem=bytes_per_elem,
              batch_size=batch_size)
    return batch_size * n_heads * n_queries * n_context * bytes_per_elem


def attention_bytes(n_queries: int, n_context: int, n_heads: int, head_dim: int, bytes_per_elem: int,
                    materialised: bool) -> int:
    """Bytes moved at least: read Q, K, V and write O; a naive kernel also writes and reads S and P."""
    qkvo = (2 * n_queries + 2 * n_context) * n_heads * head_dim * bytes_per_elem
    if not materialised:
        return qkvo
    return qkvo + 4 * score_matrix_bytes(n_queries, n_context, n_heads, bytes_per_elem)


def block_flops(n_tokens: int, d_model: int, d_ff: int | None = None, causal: bool = False) -> dict[str, int]:
    """Prefill FLOPs of one GPT-2-style block over n_tokens: 'linear' (QKV, out, MLP) and 'attention' (scores)."""
    _positive(n_tokens=n_tokens, d_model=d_model)
    d_ff = 4 * d_model if d_ff is None else d_ff
    linear = 2 * n_tokens * (4 * d_model * d_model + 2 * d_model * d_ff)  # QKV 3d^2 + out d^2, up + down d x d_ff
    return {"linear": linear, "attention": score_flops(n_tokens, n_tokens, 1, d_model, causal)}


def crossover_tokens(d_model: int, d_ff: int | None = None, causal: bool = False) -> float:
    """N at which attention FLOPs equal linear FLOPs in a block: 2 d + d_ff (6 d for d_ff = 4 d), x2 if causal."""
    _positive(d_model=d_model)
    d_ff = 4 * d_model if d_ff is None else d_ff
    return (2 * d_model + d_ff) * (2 if causal else 1)


def _warm_up(row: dict, fn: Callable[[], object], device: torch.device, min_round_s: float) -> None:
    """First call under measure_memory (peak_bytes), second timed to size a round; an OOM marks the row.

    Memory is freed only after an OOM: a full garbage collection costs ~0.2 s in a kernel that has imported
    transformers, and the tensors of a call that succeeded are already freed when their last reference goes."""
    try:
        with measure_memory(device) as mem:
            fn()
        row.update(peak_bytes=mem.peak, number=calls_per_round(time_once(fn, device=device), min_round_s))
    except Exception as error:  # noqa: BLE001 - only OOM is tolerated, the rest is re-raised
        if not is_oom(error):
            raise
        row["status"] = "OOM"
        free_memory(device)


def _time_round(row: dict, fn: Callable[[], object], samples: list[float], device: torch.device,
                min_round_s: float) -> None:
    """One round: `number` single synchronized calls, then re-aim `number` at the fastest call so far."""
    try:
        samples.extend(time_once(fn, device=device) for _ in range(row["number"]))
        row["number"] = calls_per_round(min(samples), min_round_s)
    except Exception as error:  # noqa: BLE001 - only OOM is tolerated, the rest is re-raised
        if not is_oom(error):
            raise
        row["status"] = "OOM"
        free_memory(device)


def interleaved_sweep(sizes: list[int], prepare: Callable[[int], dict[str, Callable[[], object]]],
                      device: torch.device | str | None = None, rounds: int = 5, min_round_s: float = 0.03,
                      key: str = "N", desc: str = "sweep") -> pd.DataFrame:
    """Time every function prepare(n) returns, for every size, in turns; what runs out of memory says 'OOM'.

    Each function is warmed up once under measure_memory (giving `peak_bytes`); then all of them are timed
    round-robin for `rounds` rounds, so that a change in the machine's background load falls on every size
    alike instead of bending one end of a curve. In each round a function is called `number` times (each
    call timed on its own, synchronized), enough to fill `min_round_s` at its fastest time so far. One row
    per (size, name) with the median, quartiles and fastest of its calls.
    """
    from tqdm.auto import tqdm

    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    device = as_device(device)
    rows, timed = [], []  # timed: (row, fn, per-call seconds)
    for n in tqdm(sizes, desc=f"{desc}: warm-up"):
        try:
            fns = prepare(n)
        except Exception as error:  # noqa: BLE001 - only OOM is tolerated, the rest is re-raised
            if not is_oom(error):
                raise
            fns = {}
            rows.append({key: n, "name": "inputs", "status": "OOM"})
            free_memory(device)
        for name, fn in fns.items():
            rows.append({key: n, "name": name, "status": "ok"})
            _warm_up(rows[-1], fn, device, min_round_s)
            timed.append((rows[-1], fn, []))
    for _ in tqdm(range(rounds), desc=f"{desc}: {rounds} rounds"):
        for row, fn, samples in timed:
            if row["status"] == "ok":
                _time_round(row, fn, samples, device, min_round_s)
    for row, _, samples in timed:
        if row["status"] == "ok":
            timing = Timing.from_times(samples)
            row.update(median_s=timing.median, iqr_s=timing.iqr, min_s=timing.min, runs=timing.runs)
    return pd.DataFrame(rows)


def fit_loglog_slope(x, y) -> float:
    """Slope of log y against log x by least squares (the exponent p in y ~ x^p); NaNs are skipped."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if keep.sum() < 2:
        raise ValueError(f"need at least 2 positive finite points to fit a slope, got {int(keep.sum())}")
    return float(np.polyfit(np.log(x[keep]), np.log(y[keep]), 1)[0])


def fit_power(x, y, power: float) -> float:
    """Coefficient c of y = c x^power that fits the points best in log space (geometric mean of y / x^p)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if not keep.any():
        raise ValueError("need at least 1 positive finite point to fit a coefficient")
    return float(np.exp(np.mean(np.log(y[keep]) - power * np.log(x[keep]))))


def gpt2_style_config(d_model: int, n_layers: int, n_heads: int, n_positions: int,
                      vocab_size: int = 50257) -> PretrainedConfig:
    """A GPT-2 config of any width and depth, with enough positions for long prompts (d_ff = 4 d)."""
    _positive(d_model=d_model, n_layers=n_layers, n_heads=n_heads, n_positions=n_positions)
    if d_model % n_heads:
        raise ValueError(f"d_model ({d_model}) must be divisible by n_heads ({n_heads})")
    return AutoConfig.for_model("gpt2", n_embd=d_model, n_layer=n_layers, n_head=n_heads,
                                n_positions=n_positions, vocab_size=vocab_size)


def plot_flop_split(n_tokens: int, d_model: int, n_heads: int, n_layers: int, peak_flops: float,
                    device_label: str, bytes_per_elem: int = 2, ax_pair=None):
    """Left: per-block FLOPs vs N (linear vs attention, crossover). Right: predicted prefill time, split."""
    import matplotlib.pyplot as plt

    _positive(peak_flops=peak_flops)
    if ax_pair is None:
        _, ax_pair = plt.subplots(1, 2, figsize=(12, 4))
    ax, bar = ax_pair
    ns = np.unique(np.logspace(1, np.log10(max(4 * n_tokens, 64 * d_model)), 200).astype(int))
    split = [block_flops(int(n), d_model) for n in ns]
    ax.loglog(ns, [s["linear"] for s in split], label="projections + MLP (~N)")
    ax.loglog(ns, [s["attention"] for s in split], label="attention scores (~N^2)")
    cross = crossover_tokens(d_model)
    ax.axvline(cross, ls="--", color="gray", lw=1)
    ax.annotate(f"crossover N = 6 d = {cross:,.0f}", (cross, ax.get_ylim()[0]), textcoords="offset points",
                xytext=(4, 8), fontsize=8, color="gray")
    ax.axvline(n_tokens, color="black", lw=1)
    ax.set_xlabel("prompt length N (tokens)")
    ax.set_ylabel("FLOPs per block")
    ax.set_title(f"d_model = {d_model}: FLOPs of one block vs N", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    here = block_flops(n_tokens, d_model)
    times = {k: n_layers * v / peak_flops for k, v in here.items()}
    share = here["attention"] / sum(here.values())
    bar.barh(["prefill"], [times["linear"]], label="projections + MLP")
    bar.barh(["prefill"], [times["attention"]], left=[times["linear"]], label="attention scores")
    scores = score_matrix_bytes(n_tokens, n_tokens, n_heads, bytes_per_elem)
    bar.set_xlabel("predicted time at peak FLOP/s (s)")
    bar.set_title(f"N = {n_tokens:,}, {n_layers} layers, {n_heads} heads on {device_label}: "
                  f"{format_seconds(sum(times.values()))}\nattention {share:.0%} of FLOPs; "
                  f"a naive score matrix would take {scores / 2**30:,.3g} GiB per layer", fontsize=9)
    bar.legend(fontsize=8, loc="lower right")
    return ax_pair
