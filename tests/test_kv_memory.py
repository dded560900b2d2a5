import math

import numpy as np
import pytest

import helpers
from helpers.course.kv_cache import (
    cache_dtype_bytes,
    fill_pool,
    max_batch,
    max_context,
    plan_memory,
    reserved_tokens,
    sample_request_lengths,
    tensor_parallel_memory,
)

LLAMA3_8B_TOKEN = 131_072  # bf16 KV bytes per token: 2 x 2 x 32 layers x 8 KV heads x 128


def test_cache_dtype_bytes():
    assert [cache_dtype_bytes(n) for n in ("fp32", "bf16", "fp16", "fp8", "int8")] == [4, 2, 2, 1, 1]
    with pytest.raises(ValueError, match="name must be one of"):
        cache_dtype_bytes("fp4")


def test_max_batch_and_context_worked_example():
    weights = helpers.model_spec("llama-3-8b").weight_bytes(2)
    assert max_batch(80e9, weights, LLAMA3_8B_TOKEN, 8192) == 59  # (80e9 - 16.06e9) / (131072 x 8192) = 59.5
    assert max_batch(80e9, weights, LLAMA3_8B_TOKEN // 2, 8192) == 119  # fp8 cache: twice as many
    assert max_context(80e9, weights, LLAMA3_8B_TOKEN, 1) == int((80e9 - weights) // LLAMA3_8B_TOKEN)
    assert max_batch(10e9, weights, LLAMA3_8B_TOKEN, 8192) == 0  # the weights alone do not fit


def test_max_batch_is_the_largest_that_fits():
    for memory, context in [(1e6, 7), (12_345_678, 100), (2**30, 4096)]:
        b = max_batch(memory, 1000, 96, context)
        assert b * 96 * context <= memory - 1000 < (b + 1) * 96 * context
        c = max_context(memory, 1000, 96, 3)
        assert c * 96 * 3 <= memory - 1000 < (c + 1) * 96 * 3


@pytest.mark.parametrize("fn, last", [(max_batch, "context"), (max_context, "batch_size")])
@pytest.mark.parametrize("name, bad, message", [
    ("memory_bytes", -1, "memory_bytes must be a number >= 0"),
    ("weight_bytes", "16e9", "weight_bytes must be a number >= 0"),
    ("kv_bytes_per_token", 0, "kv_bytes_per_token must be an integer >= 1"),
    ("kv_bytes_per_token", 2.5, "kv_bytes_per_token must be an integer >= 1"),
    ("last", 0, "must be an integer >= 1"),
    ("last", True, "must be an integer >= 1"),
])
def test_capacity_rejects_bad_input(fn, last, name, bad, message):
    args = dict(memory_bytes=1e9, weight_bytes=1e8, kv_bytes_per_token=1024, **{last: 16})
    args[last if name == "last" else name] = bad
    with pytest.raises(ValueError, match=(f"{last} " if name == "last" else "") + message):
        fn(**args)


def test_plan_memory_matches_formula():
    spec = helpers.model_spec("llama-3-70b")
    plan = plan_memory(spec.n_layers, spec.n_kv_heads, spec.head_dim, spec.n_params, context=131_072, batch_size=1,
                       cache_bytes=2, weight_bytes_per_param=2, memory_bytes=141e9)
    assert plan.kv_bytes == 327_680 * 131_072
    assert plan.weight_bytes == spec.weight_bytes(2)
    assert not plan.fits and plan.max_batch == 0 and plan.max_context == 0  # 141 GB < 70.6e9 x 2 bytes
    with pytest.raises(ValueError, match="n_params must be an integer >= 1"):
        plan_memory(2, 2, 8, 0, 16, 1, 2, 2, 1e9)


def test_sample_request_lengths_in_range_and_reproducible():
    lengths = sample_request_lengths(500, max_len=1024, seed=3)
    assert lengths.shape == (500,) and lengths.min() >= 1 and lengths.max() <= 1024
    assert np.array_equal(lengths, sample_request_lengths(500, max_len=1024, seed=3))
    assert len(set(lengths.tolist())) > 100  # varied
    with pytest.raises(ValueError, match="n_requests must be an integer >= 1"):
        sample_request_lengths(0, max_len=10)


def test_reserved_tokens_contiguous_and_paged():
    lengths = np.array([1, 16, 17, 100])
    assert reserved_tokens(lengths, "contiguous", max_len=128).tolist() == [128] * 4
    assert reserved_tokens(lengths, "paged", max_len=128, block_size=16).tolist() == [16, 16, 32, 112]
    with pytest.raises(ValueError, match="scheme must be one of"):
        reserved_tokens(lengths, "buddy", max_len=128)
    with pytest.raises(ValueError, match=r"lengths must each be in \[1, max_len=64\]"):
        reserved_tokens(lengths, "paged", max_len=64)
    with pytest.raises(ValueError, match="block_size must be an integer >= 1"):
        reserved_tokens(lengths, "paged", max_len=128, block_size=0)
    with pytest.raises(ValueError, match="lengths must be a non-empty 1-D sequence of integers"):
        reserved_tokens(np.array([1.5]), "paged", max_len=128)


def test_fill_pool_paged_beats_contiguous_and_wastes_under_a_block():
    lengths = sample_request_lengths(2000, max_len=2048, seed=0)
    contiguous = fill_pool(lengths, 200_000, "contiguous", max_len=2048)
    paged = fill_pool(lengths, 200_000, "paged", max_len=2048, block_size=16)
    assert contiguous.requests_fit == 200_000 // 2048
    assert paged.requests_fit > 3 * contiguous.requests_fit
    assert paged.tokens_reserved <= 200_000 < paged.tokens_reserved + 2048
    assert 0 <= paged.waste_per_request < 16
    assert paged.waste_fraction < 0.05 < contiguous.waste_fraction
    with pytest.raises(ValueError, match="pool_tokens must be an integer >= 1"):
        fill_pool(lengths, 0, "paged", max_len=2048)


def test_fill_pool_everything_fits():
    result = fill_pool(np.array([5, 5]), 10_000, "paged", max_len=16, block_size=4)
    assert result.requests_fit == 2 and result.tokens_used == 10 and result.tokens_reserved == 16
    assert result.waste_fraction == pytest.approx(6 / 16)


def test_generation_flops_orders_with_and_without_cache():
    from helpers.course.kv_cache import generation_flops

    spec = helpers.model_spec("gpt2")
    small, big = (generation_flops(spec, n, cached=True) for n in (1000, 2000))
    assert big["matmul"] == 2 * small["matmul"]  # O(T) matmul work with the cache
    assert big["attention"] / small["attention"] == pytest.approx(4, rel=0.01)  # O(T^2) attention
    small, big = (generation_flops(spec, n, cached=False) for n in (1000, 2000))
    assert big["matmul"] / small["matmul"] == pytest.approx(4, rel=0.01)  # O(T^2) without
    assert big["attention"] / small["attention"] == pytest.approx(8, rel=0.01)  # O(T^3) without
    one = generation_flops(spec, 1, cached=True)
    assert one["total"] == helpers.forward_flops(spec, 1) == generation_flops(spec, 1, cached=False)["total"]


def test_cached_tokens_stops_at_the_sliding_window():
    from helpers.course.kv_cache import cached_tokens

    mistral, llama = helpers.model_spec("mistral-7b"), helpers.model_spec("llama-3-8b")
    # transformers keeps window - 1 tokens in a sliding layer: the new token makes the window
    assert cached_tokens(mistral, 1000) == 1000 and cached_tokens(mistral, 32_768) == 4095
    assert cached_tokens(llama, 8192) == 8192
    assert cached_tokens(helpers.model_spec("gemma-3-27b"), 32_768) == 32_768  # its full layers keep every token
    with pytest.raises(ValueError, match="context must be an integer >= 1"):
        cached_tokens(llama, 0)


def test_sliding_window_comes_from_the_registry():
    from helpers.course.kv_cache import SLIDING_WINDOW

    assert SLIDING_WINDOW == {"mistral-7b": 4096}  # hybrids (Gemma 3, GPT-OSS) also have full layers
    assert all(helpers.model_spec(n).layer_kinds() == ("sliding",) * helpers.model_spec(n).n_layers
               for n in SLIDING_WINDOW)


def test_plan_for_is_plan_memory_for_a_dense_model():
    from helpers.course.kv_cache import plan_for

    spec = helpers.model_spec("llama-3-8b")
    for context, batch, memory in [(8192, 16, 80e9), (131_072, 1, 141e9), (4096, 3, 10e9)]:
        dense = plan_memory(spec.n_layers, spec.n_kv_heads, spec.head_dim, spec.n_params, context, batch, 2, 2, memory)
        assert plan_for(spec, context, batch, memory) == dense


@pytest.mark.parametrize("name", ["gemma-3-27b", "gpt-oss-20b", "deepseek-v3", "mistral-7b", "mini-gemma3"])
def test_plan_for_counts_each_layer_kind(name):
    from helpers.course.kv_cache import plan_for

    spec = helpers.model_spec(name)
    memory = spec.weight_bytes(2) + 7.5 * helpers.cache_bytes(spec, 20_000)  # room for 7.5 sequences of 20k
    plan = plan_for(spec, 20_000, 3, memory)
    assert plan.kv_bytes == helpers.cache_bytes(spec, 20_000, 3) and plan.max_batch == 7
    room = memory - plan.weight_bytes
    if spec.attention == "sliding":  # the cache stops growing at window - 1 tokens, and three fit
        assert plan.max_context == math.inf
        assert plan_for(spec, 20_000, 20, memory).max_context < spec.sliding_window - 1
        return
    longest = plan.max_context  # the largest context whose cache for 3 sequences fits
    assert helpers.cache_bytes(spec, longest, 3) <= room < helpers.cache_bytes(spec, longest + 1, 3)


def test_longest_context_below_and_past_the_window():
    from helpers.course.kv_cache import longest_context

    spec = helpers.model_spec("mini-gemma3")  # 5 sliding layers of window 64, 1 full
    for room in [1, 5_000, 63 * spec.kv_bytes_per_token(2), 10**6, 10**8]:
        c = longest_context(spec, room, 0, 2)  # batch 2
        assert c == 0 or helpers.cache_bytes(spec, c, 2) <= room
        assert helpers.cache_bytes(spec, c + 1, 2) > room
    assert longest_context(spec, 10, 100, 1) == 0  # the weights alone do not fit


def test_tensor_parallel_memory_per_layer_kind():
    deepseek, mistral = helpers.model_spec("deepseek-v3"), helpers.model_spec("mistral-7b")
    latent = helpers.cache_bytes(deepseek, 4096, 8)
    for tp in (1, 8):  # every GPU keeps the whole latent: all heads read the one vector
        assert tensor_parallel_memory(deepseek, tp, 4096, 8)["kv_bytes"] == latent
    whole = tensor_parallel_memory(mistral, 1, 32_768)["kv_bytes"]
    assert whole == helpers.cache_bytes(mistral, 32_768) == 32 * 2 * 8 * 128 * 2 * 4095  # capped at the window
    assert tensor_parallel_memory(mistral, 4, 32_768)["kv_bytes"] == whole // 4


def test_pool_block_map_matches_fill_pool():
    from helpers.course.kv_cache import pool_block_map

    lengths = np.array([20, 5, 40, 16, 33])
    owner, used = pool_block_map(lengths, 128, "paged", max_len=64, block_size=8)
    result = fill_pool(lengths, 128, "paged", max_len=64, block_size=8)
    assert (owner >= 0).sum() * 8 == result.tokens_reserved
    assert round(used.sum() * 8) == result.tokens_used
    owner, used = pool_block_map(lengths, 128, "contiguous", max_len=64, block_size=8)
    assert owner.tolist() == [0] * 8 + [1] * 8  # two 64-token slabs, side by side
    assert round(used.sum() * 8) == 25


def test_contiguous_fits_pool_over_max_len():
    lengths = sample_request_lengths(100, max_len=512, seed=1)
    assert fill_pool(lengths, 10_000, "contiguous", max_len=512).requests_fit == 10_000 // 512


def test_vllm_default_and_binary_capacity():
    from helpers.course.kv_cache import VLLM_GPU_MEMORY_UTILIZATION, kv_capacity_tokens

    assert VLLM_GPU_MEMORY_UTILIZATION == 0.92
    h100, s = helpers.gpu_spec("H100 SXM"), helpers.model_spec("llama-3-8b")
    assert kv_capacity_tokens(s, h100) == int((0.92 * 81_559 * 2**20 - s.weight_bytes(2)) // LLAMA3_8B_TOKEN)


def test_kv_budget_takes_the_reserve_out_of_the_same_fraction():
    from helpers.course.kv_cache import kv_budget_bytes, kv_capacity_tokens

    assert kv_budget_bytes(100.0, 30.0, 0.9) == pytest.approx(60.0)  # the fraction is the whole instance's budget
    assert kv_budget_bytes(100.0, 30.0, 0.9, reserve_bytes=10.0) == pytest.approx(50.0)  # activations come out of it
    assert kv_budget_bytes(100.0, 95.0, 0.9) == 0.0
    with pytest.raises(ValueError, match="memory_fraction"):
        kv_budget_bytes(100.0, 30.0, 1.5)
    h100, s = helpers.gpu_spec("H100 SXM"), helpers.model_spec("llama-3-8b")
    upper = kv_capacity_tokens(s, h100)
    reserved = kv_capacity_tokens(s, h100, reserve_bytes=2 * 2**30)  # e.g. 2 GiB of activations and graphs
    assert upper - reserved == pytest.approx(2 * 2**30 / LLAMA3_8B_TOKEN, abs=1)


def test_tokens_that_fit_is_the_one_count():
    from helpers.course.kv_cache import tokens_that_fit

    assert tokens_that_fit(1000, 10) == 100 and tokens_that_fit(999.9, 10) == 99
    assert tokens_that_fit(-5, 10) == 0  # no room left after the weights
    with pytest.raises(ValueError, match="kv_bytes_per_token"):
        tokens_that_fit(1000, 0)
