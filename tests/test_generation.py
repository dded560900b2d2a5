import math

import pytest
import torch

import helpers
from helpers.course.latency import percentiles
from helpers.course.phases import GenerationResult, timed_generate, timed_model_generate
from helpers.plumbing.memory import cpu_allocations


@pytest.fixture(scope="module")
def small_gpt2():
    config = helpers.build_config(helpers.model_spec("gpt2"))
    config.update({"n_layer": 2, "n_embd": 64, "n_head": 4, "vocab_size": 256, "n_positions": 128})
    return helpers.random_model(config, "cpu", torch.float32)


def prompt(n: int = 7) -> torch.Tensor:
    return torch.randint(0, 256, (1, n), generator=torch.Generator().manual_seed(1))


def test_greedy_tokens_equal_model_generate(small_gpt2):
    ids = prompt()
    result = timed_generate(small_gpt2, ids, 12)
    reference = small_gpt2.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12, do_sample=False,
                                    eos_token_id=None, pad_token_id=0)
    assert result.token_ids == reference[0, ids.shape[1]:].tolist()
    assert all(isinstance(t, int) for t in result.token_ids)


def test_metrics_follow_vllm_definitions(small_gpt2):
    result = timed_generate(small_gpt2, prompt(), 9)
    assert result.n_tokens == len(result.timestamps) == 9
    assert all(b >= a for a, b in zip(result.timestamps[:-1], result.timestamps[1:], strict=True))
    assert result.ttft == result.timestamps[0] > 0
    assert result.e2el == result.timestamps[-1]
    assert len(result.itl) == 8
    assert math.isclose(result.ttft + sum(result.itl), result.e2el, rel_tol=1e-9)
    assert math.isclose(result.tpot, (result.e2el - result.ttft) / 8)
    assert math.isclose(result.tpot, sum(result.itl) / len(result.itl))
    row = result.summary()
    assert row["new_tokens"] == 9 and row["prompt_len"] == 7 and row["itl_p50_s"] <= row["itl_p99_s"]


def test_single_token_has_no_tpot(small_gpt2):
    result = timed_generate(small_gpt2, prompt(), 1)
    assert result.n_tokens == 1 and result.itl == [] and math.isnan(result.tpot)
    assert result.ttft == result.e2el


def test_stops_at_eos_and_calls_back(small_gpt2):
    ids = prompt()
    first = timed_generate(small_gpt2, ids, 6).token_ids
    seen = []
    result = timed_generate(small_gpt2, ids, 6, eos_token_id=first[2], on_token=lambda i, t, s: seen.append((i, t, s)))
    assert result.token_ids == first[: first.index(first[2]) + 1]
    assert result.stopped_on_eos
    assert [t for _, t, _ in seen] == result.token_ids
    assert [s for _, _, s in seen] == result.timestamps


def test_sampling_is_reproducible_with_a_generator(small_gpt2):
    ids = prompt()
    a = timed_generate(small_gpt2, ids, 8, do_sample=True, generator=torch.Generator().manual_seed(3))
    b = timed_generate(small_gpt2, ids, 8, do_sample=True, generator=torch.Generator().manual_seed(3))
    assert a.token_ids == b.token_ids


@pytest.mark.parametrize("kwargs, message", [
    ({"max_new_tokens": 0}, "max_new_tokens must be an integer >= 1"),
    ({"max_new_tokens": 2.0}, "max_new_tokens must be an integer >= 1"),
    ({"max_new_tokens": 2, "do_sample": True, "temperature": 0.0}, "temperature must be a number > 0"),
])
def test_rejects_bad_arguments(small_gpt2, kwargs, message):
    with pytest.raises(ValueError, match=message):
        timed_generate(small_gpt2, prompt(), **kwargs)


def test_rejects_batched_prompts(small_gpt2):
    with pytest.raises(ValueError, match="input_ids must have shape"):
        timed_generate(small_gpt2, torch.zeros(2, 4, dtype=torch.long), 3)


def test_percentiles_and_hand_made_result():
    empty = percentiles([], prefix="itl")
    assert set(empty) == {"itl_p50_s", "itl_p90_s", "itl_p99_s"} and all(math.isnan(v) for v in empty.values())
    assert percentiles([1.0, 2.0, 3.0])["p50_s"] == 2.0
    r = GenerationResult([5, 6, 7], [0.5, 0.7, 1.0], prompt_len=4)
    assert math.isclose(r.tpot, 0.25) and r.itl == pytest.approx([0.2, 0.3]) and r.e2el == 1.0


def test_timed_model_generate_matches_own_loop(small_gpt2):
    ids = prompt()
    ours = timed_generate(small_gpt2, ids, 10)
    theirs = timed_model_generate(small_gpt2, ids, 10, eos_token_id=None, pad_token_id=0)
    assert theirs.token_ids == ours.token_ids
    assert len(theirs.timestamps) == 10 and theirs.ttft > 0
    assert math.isclose(theirs.ttft + sum(theirs.itl), theirs.e2el, rel_tol=1e-9)


def test_cpu_allocations_counts_held_and_peak_bytes():
    def make():
        scratch = torch.ones(1000, dtype=torch.float32)  # 4,000 B, freed at return
        kept = torch.zeros(250, dtype=torch.float64)  # 2,000 B, returned
        return kept + scratch[:250].double() * 0
    result, alloc = cpu_allocations(make)
    assert result.shape == (250,)
    assert alloc.held == result.nbytes == 2000
    assert alloc.peak >= 4000 + 2000


def test_ttft_plus_itls_is_e2el_and_tpot_is_mean_itl(small_gpt2):
    """Identities of the result type (the chapter-2 notebook leaves them to this test)."""
    r = timed_generate(small_gpt2, prompt(), 7)
    assert math.isclose(r.ttft + sum(r.itl), r.e2el, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(r.tpot, sum(r.itl) / len(r.itl), rel_tol=1e-9)
    assert r.summary()["tpot_s"] == r.tpot


def test_a_static_cache_gives_the_same_tokens(small_gpt2):
    from transformers import StaticCache

    ids = prompt()
    dynamic = timed_generate(small_gpt2, ids, 6)
    static = timed_generate(small_gpt2, ids, 6, cache=StaticCache(config=small_gpt2.config, max_cache_len=16))
    assert static.token_ids == dynamic.token_ids


def test_dynamic_cache_append_copies_the_whole_cache(small_gpt2):
    from helpers.course.phases import cache_copy_bytes

    ids = prompt(20)
    token, cache = helpers.prefill(small_gpt2, ids)
    copied = cache_copy_bytes(lambda: helpers.decode_step(small_gpt2, token, cache))
    kv = helpers.kv_cache_bytes(2, 4, 16, 20, 1, 4)  # 2 layers, 4 heads of 16, fp32
    per_token = helpers.kv_cache_bytes(2, 4, 16, 1, 1, 4)
    assert copied == 2 * (kv + per_token)  # read the old cache and the new token, write the longer cache


def test_request_roofline_is_one_prefill_and_n_minus_1_steps():
    from helpers.course.step_time import request_roofline

    spec = helpers.model_spec("llama-3-8b")
    ttft, decode = request_roofline(spec, 4000, 200, 989e12, 3.35e12, 2)
    assert math.isclose(ttft, helpers.forward_flops(spec, 4000, logits_positions=1) / 989e12)  # compute-bound
    step = helpers.decode_step_bytes(spec, 4100, 1, 2) / 3.35e12
    assert math.isclose(decode, 199 * step, rel_tol=1e-6)
    assert request_roofline(spec, 10, 1, 989e12, 3.35e12)[1] == 0
    _, dynamic = request_roofline(spec, 4000, 200, 989e12, 3.35e12, 2, cache="dynamic")
    assert dynamic > decode


def test_plot_timeline_draws_prefill_and_one_bar_per_step():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from helpers.course.latency import plot_timeline

    fig, ax = plt.subplots()
    plot_timeline(ax, [0.1, 0.15, 0.21, 0.26], "t")
    prefill_bar, steps = ax.collections[:2]
    assert len(prefill_bar.get_paths()) == 1 and len(steps.get_paths()) == 3
    plt.close(fig)


def test_fixed_context_step_cuts_the_cache_back_each_call(small_gpt2):
    ids = prompt(10)
    step = helpers.fixed_context_step(small_gpt2, ids, 2)
    first = step()
    assert first.shape[:2] == (1, 2) and torch.equal(step(), first)  # the same step: 10 tokens cached each time
    with pytest.raises(ValueError, match="n_new_tokens"):
        helpers.fixed_context_step(small_gpt2, ids, 0)


def test_static_cache_builder_gives_the_same_tokens(small_gpt2):
    ids = prompt()
    static = timed_generate(small_gpt2, ids, 6, cache=helpers.static_cache(small_gpt2, ids.shape[1] + 6))
    assert static.token_ids == timed_generate(small_gpt2, ids, 6).token_ids
