"""Chapter 3, attention is quadratic: what a causal kernel saves, and the figure that splits a block's FLOPs.

The closed forms (score FLOPs, score-matrix bytes, the crossover length) live in `formulas`; the timing
sweep in `plumbing.sweeps`; the slope fits in `plumbing.fits`.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np

from ..plumbing.timing import format_seconds
from ..plumbing.validate import positive, positive_int
from .formulas import block_flops, crossover_tokens, score_matrix_bytes


def cpu_flash_blocks(n_tokens: int) -> tuple[int, int]:
    """(query, key) block sizes of PyTorch's CPU flash-attention kernel for a prompt of n_tokens queries."""
    q_block = 256 if positive_int("n_tokens", n_tokens) >= 768 else 64 if n_tokens >= 192 else 32
    return q_block, 512


def causal_time_ratio(n_tokens: int, n_heads: int, n_threads: int | None = None, q_block: int = 256,
                      kv_block: int = 512) -> float:
    """Predicted causal / full time of a kernel that skips the key blocks above the diagonal.

    Like PyTorch's CPU flash kernel (512-key blocks; 256 queries from N = 768 on, 64 from 192, else 32:
    `cpu_flash_blocks`), it scores, for each query block, every key block up to the diagonal, and splits its
    (head, query block) tasks into `n_threads` contiguous equal chunks: the slowest chunk sets the time.
    `n_threads=None` means balanced work (a GPU schedules blocks on free SMs): then the ratio is the blocked
    share of pairs, a little over one half."""
    for name, value in dict(n_tokens=n_tokens, n_heads=n_heads, q_block=q_block, kv_block=kv_block).items():
        positive_int(name, value)
    starts = range(0, n_tokens, q_block)
    keys = [min(math.ceil(min(m + q_block, n_tokens) / kv_block) * kv_block, n_tokens) for m in starts]
    causal = np.tile([k * min(q_block, n_tokens - m) for m, k in zip(starts, keys, strict=True)], n_heads)
    full = np.tile([n_tokens * min(q_block, n_tokens - m) for m in starts], n_heads)  # (heads x query blocks,)
    if n_threads is None:
        return float(causal.sum() / full.sum())
    chunk = math.ceil(len(full) / positive_int("n_threads", n_threads))
    slowest = [max(work[i:i + chunk].sum() for i in range(0, len(work), chunk)) for work in (causal, full)]
    return float(slowest[0] / slowest[1])


def plot_flop_split(n_tokens: int, d_model: int, n_heads: int, n_layers: int, peak_flops: float,
                    device_label: str, bytes_per_elem: int = 2, ax_pair=None):
    """Left: per-block FLOPs vs N (linear vs attention, crossover). Right: predicted prefill time, split."""
    positive("peak_flops", peak_flops)
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
