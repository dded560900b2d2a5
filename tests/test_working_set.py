"""The effective cache and the working sets sized from it: measured, capped by memory, faked only in tests."""

import pytest

import helpers
from helpers.plumbing import working_set as ws

MiB = 2**20


def test_effective_cache_is_the_last_size_read_clearly_faster_than_memory():
    sizes = [MiB * 2**k for k in range(8)]  # 1 .. 128 MiB
    rates = [200, 200, 190, 180, 120, 60, 50, 50]  # GB/s: falls past 8 MiB, settles from 32 MiB
    cache, memory, settled = ws.effective_cache(sizes, rates)
    assert (cache, memory, settled) == (16 * MiB, 50, True)


def test_a_disturbed_small_size_does_not_end_the_cache_early():
    sizes = [MiB * 2**k for k in range(6)]
    rates = [200, 20, 190, 180, 40, 40]  # the 2 MiB probe was disturbed: a larger size ran faster
    assert ws.effective_cache(sizes, rates)[0] == 8 * MiB


def test_a_cache_that_never_ends_within_the_sweep_is_not_settled():
    sizes = [MiB * 2**k for k in range(6)]
    rates = [200, 200, 200, 200, 150, 60]  # still falling at the largest size
    assert ws.effective_cache(sizes, rates)[2] is False


def test_a_sweep_where_nothing_ran_faster_finds_no_cache():
    sizes = [MiB * 2**k for k in range(6)]
    assert ws.effective_cache(sizes, [1, 1, 1, 1, 1, 1])[2] is False  # not settled: checks that need it skip


def test_effective_cache_rejects_mismatched_input():
    with pytest.raises(ValueError, match="sizes and rates"):
        ws.effective_cache([MiB], [1.0])


def test_the_override_fakes_the_cache_and_working_sets_follow_it(monkeypatch):
    monkeypatch.setenv(ws.TEST_CACHE_ENV, str(8 * MiB))
    assert helpers.measure_cache_size("cpu").source == "test override"
    small = helpers.working_set(4, "cpu")
    assert (small.nbytes, small.capped, small.past_cache) == (32 * MiB, False, True)
    assert helpers.copies_past_cache(4 * MiB, 4, "cpu") == 8


def test_a_huge_cache_is_capped_by_the_memory_limit_and_says_so(monkeypatch):
    monkeypatch.setenv(ws.TEST_CACHE_ENV, str(2 * 2**30))
    big = helpers.working_set(4, "cpu")
    assert big.capped and big.nbytes == ws.working_set_limit("cpu") <= helpers.memory_budget_bytes() / 8
    assert not big.past_cache  # a probe sized from it cannot stream from main memory here
    assert "capped by the memory limit" in str(big)


def test_working_set_rejects_bad_arguments():
    with pytest.raises(ValueError, match="factor"):
        helpers.working_set(0, "cpu")
    with pytest.raises(ValueError, match="item_bytes"):
        helpers.copies_past_cache(0)


def test_the_measured_cache_is_kept_and_read_back(monkeypatch, tmp_path):
    monkeypatch.setenv("LAB_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(ws.TEST_CACHE_ENV, raising=False)
    monkeypatch.setattr(ws, "sweep_sizes", lambda device: [MiB, 2 * MiB, 4 * MiB])
    first = helpers.measure_cache_size("cpu", refresh=True)
    assert first.sizes == (MiB, 2 * MiB, 4 * MiB) and len(first.read_rates) == 3
    assert helpers.measure_cache_size("cpu") == first  # read back from lab_dir(), not measured again
