"""run_paged: transformers' continuous-batching engine, run for real on a tiny model, and its cache read back."""

import threading

import pytest
import torch
from transformers import GenerationConfig

import helpers
from helpers.course.serving.engine import on_new_thread, run_paged


@pytest.fixture(scope="module")
def tiny():
    config = helpers.gpt2_style_config(d_model=64, n_layers=2, n_heads=2, n_positions=128, vocab_size=256)
    return helpers.random_model(config, device="cpu", dtype=torch.float32)


def test_the_engine_allocates_the_blocks_of_the_paged_formula(tiny):
    greedy = GenerationConfig(do_sample=False, max_new_tokens=5, eos_token_id=None, pad_token_id=0)
    run = run_paged(tiny, [[1, 2, 3], [4, 5, 6, 7]], greedy, block_size=16, num_blocks=32)
    block = helpers.kv_cache_bytes(2, 2, 32, 16, 1, 4)
    spare = run.cache_bytes - 2 * run.sector_bytes - run.blocks * block
    assert run.blocks > 0 and 0 <= spare < block
    assert sorted(map(len, run.tokens)) == [5, 5]


def test_the_engine_steps_are_recorded(tiny):
    greedy = GenerationConfig(do_sample=False, max_new_tokens=5, eos_token_id=None, pad_token_id=0)
    run = run_paged(tiny, [[1, 2, 3], [4, 5, 6, 7]], greedy, block_size=16, num_blocks=32, block_sharing=False)
    assert sum(run.step_tokens) == 3 + 4 + 2 * 4  # the prompts once, then one token per decode step and request
    assert max(run.step_sequences) == 2 and run.steps == len(run.step_seconds) == len(run.step_gaps) + 1
    assert 0 < sum(run.step_seconds) + sum(run.step_gaps) < run.seconds


@pytest.mark.parametrize(("block_size", "num_blocks", "name"), [(0, 8, "block_size"), (16, -1, "num_blocks")])
def test_bad_cache_settings_name_the_argument(tiny, block_size, num_blocks, name):
    with pytest.raises(ValueError, match=name):
        run_paged(tiny, [[1]], GenerationConfig(max_new_tokens=1), block_size, num_blocks)


def test_step_starts_add_forwards_and_gaps():
    from helpers.course.serving.engine import PagedRun, step_starts

    run = PagedRun(16, 8, 8, 0, 0, 1.0, [], [4, 1, 1], [1, 1, 1], [0.010, 0.002, 0.003], [0.001, 0.004])
    assert step_starts(run) == pytest.approx([0.0, 0.011, 0.017])


def test_on_new_thread_returns_the_result_from_another_thread():
    main = threading.get_ident()
    assert on_new_thread(lambda: threading.get_ident()) != main
    assert on_new_thread(lambda: 2.5) == 2.5


def test_on_new_thread_raises_what_the_function_raised():
    def fails():
        raise ValueError("n must be >= 1")

    with pytest.raises(ValueError, match="n must be"):
        on_new_thread(fails)
