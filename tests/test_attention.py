"""Chapter 3: attention FLOP and byte counts, the crossover, the causal time ratio, OOM-tolerant sweeps, fits."""


import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from helpers.course.attention import plot_flop_split
from helpers.course.formulas import (
    attended_pairs,
    attention_bytes,
    attention_flops,
    block_flops,
    crossover_tokens,
    score_flops,
    score_matrix_bytes,
)
from helpers.plumbing.fits import fit_loglog_slope, fit_power
from helpers.plumbing.memory import is_oom
from helpers.plumbing.models import gpt2_style_config, model_spec
from helpers.plumbing.sweeps import interleaved_sweep, sweep_round_ratio
from helpers.plumbing.tokenizer import offline_tokenizer


def test_attended_pairs_full_and_causal():
    assert attended_pairs(4, 4) == 16
    assert attended_pairs(4, 4, causal=True) == 10  # 1 + 2 + 3 + 4
    assert attended_pairs(1, 100, causal=True) == 100  # one decode query sees the whole context
    assert attended_pairs(2, 5, causal=True) == 4 + 5
    with pytest.raises(ValueError, match="n_queries"):
        attended_pairs(0, 4)
    with pytest.raises(ValueError, match="cannot exceed"):
        attended_pairs(5, 4, causal=True)


def test_causal_is_about_half():
    n = 4096
    ratio = score_flops(n, n, 12, 64, causal=True) / score_flops(n, n, 12, 64)
    assert ratio == pytest.approx((n + 1) / (2 * n))


def test_score_flops_agrees_with_the_model_formula():
    spec = model_spec("gpt2")
    per_layer = score_flops(512, 512, spec.n_heads, spec.head_dim, causal=True)
    assert per_layer * spec.n_layers == attention_flops(spec, 512, 512)  # the floor: causal pairs
    assert attention_flops(spec, 512, 512, causal=False) == spec.n_layers * score_flops(512, 512, spec.n_heads,
                                                                                           spec.head_dim)


def test_latent_attention_mixes_values_at_their_own_width():
    spec = model_spec("deepseek-v3")  # queries and keys 192 wide (128 + 64 rotary), values 128
    pairs = attended_pairs(100, 100, causal=True)
    assert attention_flops(spec, 100, 100) == spec.n_layers * 2 * spec.n_heads * (192 + 128) * pairs
    assert score_flops(100, 100, 1, 192, v_head_dim=128) == 2 * (192 + 128) * 100 * 100


def test_sliding_layers_count_causal_pairs_within_their_window():
    assert attended_pairs(6, 6, causal=True, window=3) == 1 + 2 + 3 + 3 + 3 + 3
    assert attended_pairs(2, 10, causal=True, window=3) == 3 + 3  # late queries each see a whole window
    assert attended_pairs(4, 4, window=3) == 4 * 3  # no mask: each query sees the window
    spec = model_spec("gpt-oss-20b")  # 12 sliding layers of a 128-token window, 12 full ones
    per_layer = 4 * spec.n_heads * spec.head_dim
    full, sliding = attended_pairs(1024, 1024, causal=True), attended_pairs(1024, 1024, causal=True, window=128)
    assert attention_flops(spec, 1024, 1024) == 12 * per_layer * (full + sliding)


def test_score_flops_counted_by_hand():
    # Q K^T: (N x d) @ (d x M) is 2 N d M; A V: (N x M) @ (M x d) is 2 N M d; per head.
    assert score_flops(3, 5, 2, 7) == 2 * (2 * 3 * 7 * 5 + 2 * 3 * 5 * 7)


def test_score_matrix_bytes_llama_32k():
    assert score_matrix_bytes(32768, 32768, 32, 2) == 64 * 2**30
    assert score_matrix_bytes(10, 20, 3, 4, batch_size=2) == 2 * 3 * 10 * 20 * 4
    with pytest.raises(ValueError, match="bytes_per_elem"):
        score_matrix_bytes(10, 10, 1, 0)


def test_attention_bytes_fused_linear_naive_quadratic():
    fused = [attention_bytes(n, n, 12, 64, 2, materialised=False) for n in (1000, 2000)]
    naive = [attention_bytes(n, n, 12, 64, 2, materialised=True) for n in (1000, 2000)]
    assert fused[1] == 2 * fused[0]
    assert fused[0] == 4 * 1000 * 12 * 64 * 2
    assert naive[0] - fused[0] == 4 * score_matrix_bytes(1000, 1000, 12, 2)
    assert naive[1] / naive[0] > 3.5


def test_block_flops_and_crossover():
    d = 768
    split = block_flops(1, d)
    assert split["linear"] == 24 * d * d
    n = crossover_tokens(d)
    assert n == 6 * d
    at = block_flops(int(n), d)
    assert at["attention"] == at["linear"]
    assert crossover_tokens(d, causal=True) == 12 * d
    assert crossover_tokens(d, d_ff=2 * d) == 4 * d
    causal = block_flops(int(crossover_tokens(d, causal=True)), d, causal=True)
    assert causal["attention"] == pytest.approx(causal["linear"], rel=1e-3)


def test_is_oom():
    assert is_oom(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert is_oom(RuntimeError("[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: can't allocate memory: "
                               "you tried to allocate 1 bytes. Error code 12 (Cannot allocate memory)")) is False
    assert is_oom(RuntimeError("CUDA error: out of memory"))
    assert is_oom(MemoryError())
    assert not is_oom(ValueError("out of memory"))


def test_interleaved_sweep_times_every_call_and_records_oom():
    calls = []

    def prepare(n):
        if n == 3:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return {"a": lambda: calls.append(("a", n)), "b": lambda: calls.append(("b", n))}

    table = interleaved_sweep([1, 2, 3], prepare, "cpu", rounds=3, min_round_s=1e-9, desc="test")
    assert list(table["status"]) == ["ok", "ok", "ok", "ok", "OOM"]
    assert list(table["name"])[:4] == ["a", "b", "a", "b"]
    ok = table[table["status"] == "ok"]
    assert (ok["runs"] == 3).all() and (ok["min_s"] <= ok["median_s"]).all() and (ok["iqr_s"] >= 0).all()
    # rounds interleave: after the warm-ups, every (name, size) is called before any is called again
    timed = calls[8:]  # each warm-up is two calls (memory, calibration)
    first_round = timed[: len(timed) // 3]
    assert sorted(set(first_round)) == [("a", 1), ("a", 2), ("b", 1), ("b", 2)]
    # each round's fastest call, in order, and never faster than the fastest call overall
    assert all(len(r) == 3 and min(r) == m for r, m in zip(ok["round_mins"], ok["min_s"], strict=True))


def test_sweep_round_ratio_divides_round_by_round():
    a = pd.Series({"round_mins": (2.0, 6.0, 4.0)})
    b = pd.Series({"round_mins": (1.0, 2.0, 4.0)})
    # ratios 2, 3, 1: the median is 2, where the fastest calls alone would give 2 / 1
    assert sweep_round_ratio(a, b) == 2.0
    with pytest.raises(ValueError, match="every round"):
        sweep_round_ratio(a, pd.Series({"round_mins": (1.0,)}))


def test_interleaved_sweep_oom_in_one_call_keeps_the_others():
    def prepare(n):
        def big():
            if n > 1:
                raise RuntimeError("CUDA out of memory. Tried to allocate 100.00 GiB")
        return {"big": big, "small": lambda: None}

    table = interleaved_sweep([1, 2], prepare, "cpu", rounds=2, key="context", desc="test")
    status = {(c, n): s for c, n, s in table[["context", "name", "status"]].itertuples(index=False)}
    assert status == {(1, "big"): "ok", (1, "small"): "ok", (2, "big"): "OOM", (2, "small"): "ok"}


def test_interleaved_sweep_reraises_other_errors():
    def prepare(n):
        return {"buggy": lambda: 1 / 0}

    with pytest.raises(ZeroDivisionError):
        interleaved_sweep([1], prepare, "cpu")
    with pytest.raises(ValueError, match="rounds"):
        interleaved_sweep([1], prepare, "cpu", rounds=0)


def test_fit_loglog_slope_and_power():
    x = np.array([256, 512, 1024, 2048])
    assert fit_loglog_slope(x, 3e-9 * x**2) == pytest.approx(2.0)
    assert fit_loglog_slope(list(x) + [4096], list(5 * x) + [float("nan")]) == pytest.approx(1.0)
    assert fit_power(x, 3e-9 * x**2, 2) == pytest.approx(3e-9)
    with pytest.raises(ValueError, match="at least 2"):
        fit_loglog_slope([1, 2], [1, float("nan")])


def test_gpt2_style_config():
    config = gpt2_style_config(128, 4, 2, 8192)
    assert (config.n_embd, config.n_layer, config.n_head, config.n_positions) == (128, 4, 2, 8192)
    small = gpt2_style_config(64, 1, 2, 16, vocab_size=512)  # end-of-text inside the vocabulary, as the tokenizer
    assert small.bos_token_id == small.eos_token_id == offline_tokenizer(512, learned=300).eos_token_id == 511
    with pytest.raises(ValueError, match="divisible"):
        gpt2_style_config(100, 1, 3, 16)


def test_plot_flop_split_draws_both_panels():
    ax, bar = plot_flop_split(4096, 768, 12, 12, 1e14, "test device")
    assert ax.get_xscale() == "log" and len(ax.get_lines()) >= 2
    assert "s\n" in bar.get_title() and "GiB" in bar.get_title()
    plt.close("all")


def test_cpu_flash_blocks_follow_the_prompt_length():
    from helpers.course.attention import cpu_flash_blocks

    assert [cpu_flash_blocks(n) for n in (100, 191, 192, 767, 768, 8192)] == [
        (32, 512), (32, 512), (64, 512), (64, 512), (256, 512), (256, 512)]


def test_causal_time_ratio():
    from helpers.course.attention import causal_time_ratio

    # balanced work: the blocked share of pairs, just over one half at long prompts
    assert causal_time_ratio(8192, 2, None) == pytest.approx(0.53125)
    assert causal_time_ratio(8192, 2, 2) == pytest.approx(0.53125)  # one head per thread: balanced too
    # one head on two threads: the thread holding the last query blocks does 3/4 of the full work's half
    assert causal_time_ratio(8192, 1, 2) == pytest.approx(0.78125)
    assert causal_time_ratio(100, 1, None) == 1.0  # a single block: nothing is skipped
    assert 0.5 < causal_time_ratio(65536, 12, None, 128, 128) < 0.51
    with pytest.raises(ValueError, match="n_threads"):
        causal_time_ratio(1024, 1, 0)


def test_setup_leaves_no_tqdm_monitor_thread():
    """Chapter 3 hung once in nbconvert; setup() turns off tqdm's monitor thread, the thread its sweeps left running."""
    import threading

    from tqdm.auto import tqdm

    from helpers.plumbing.setup import setup

    if tqdm.monitor is not None:  # a bar from an earlier test started one
        tqdm.monitor.exit()
        tqdm.monitor = None
    setup(verbose=False)
    for _ in tqdm(range(3), disable=False):
        pass
    assert tqdm.monitor_interval == 0
    assert "tqdm_monitor" not in [t.name for t in threading.enumerate()]
