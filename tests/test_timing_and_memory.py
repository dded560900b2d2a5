import subprocess
import sys
import time

import pytest
import torch

import helpers


def test_benchmark_measures_a_known_sleep():
    timing = helpers.benchmark(lambda: time.sleep(0.01), device="cpu", warmup=1, min_run_time=0.05, min_runs=3)
    assert timing.runs >= 3
    assert 0.009 < timing.median < 0.05
    assert timing.min <= timing.q25 <= timing.median <= timing.q75 <= timing.max
    assert timing.iqr >= 0


def test_benchmark_orders_small_and_large_work():
    small, large = torch.randn(64, 64), torch.randn(512, 512)
    t_small = helpers.benchmark(lambda: small @ small, device="cpu", min_run_time=0.05)
    t_large = helpers.benchmark(lambda: large @ large, device="cpu", min_run_time=0.05)
    assert t_large.median > 10 * t_small.median  # 512x more FLOPs


def test_time_alternating_times_each_function_in_turns():
    small, large = torch.randn(64, 64), torch.randn(512, 512)
    order = []
    timings = helpers.time_alternating({"small": lambda: order.append("s") or small @ small,
                                        "large": lambda: order.append("l") or large @ large},
                                       device="cpu", rounds=3, min_round_s=0.01)
    assert timings["large"].min > 10 * timings["small"].min  # 512x more FLOPs
    assert timings["large"].runs >= 3 and timings["small"].runs > timings["large"].runs  # a round fills 10 ms
    assert order[:4] == ["s", "s", "l", "l"]  # warm-up and sizing call of each, in turn
    rounds = [c for k, c in enumerate(order[4:]) if k == 0 or c != order[3 + k]]  # runs of equal calls
    assert rounds == ["s", "l"] * 3  # every round: the small calls, then the large ones


@pytest.mark.parametrize("kwargs, word", [({"fns": {}}, "fns"), ({"rounds": 0}, "rounds"),
                                          ({"min_round_s": 0}, "min_round_s")])
def test_time_alternating_rejects_bad_arguments(kwargs, word):
    with pytest.raises(ValueError, match=word):
        helpers.time_alternating(**({"fns": {"f": lambda: None}} | kwargs), device="cpu")


@pytest.mark.parametrize("kwargs, word", [({"warmup": -1}, "warmup"), ({"min_run_time": 0}, "min_run_time"),
                                          ({"min_runs": 0}, "min_runs")])
def test_benchmark_rejects_bad_arguments(kwargs, word):
    with pytest.raises(ValueError, match=word):
        helpers.benchmark(lambda: None, device="cpu", **kwargs)


def test_timing_from_times_and_format():
    t = helpers.Timing.from_times([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (t.median, t.min, t.max, t.runs) == (3.0, 1.0, 5.0, 5)
    assert t.q25 == 2.0 and t.q75 == 4.0
    assert helpers.format_seconds(0.0123) == "12.3 ms"
    assert helpers.format_seconds(2.5) == "2.5 s"
    with pytest.raises(ValueError, match="times"):
        helpers.Timing.from_times([])


def test_time_once_is_positive():
    assert 0.004 < helpers.time_once(lambda: time.sleep(0.005), device="cpu") < 0.5


RSS_PROBE = """
import time, torch, helpers
with helpers.measure_memory("cpu") as held:
    x = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
with helpers.measure_memory("cpu") as freed:
    y = torch.ones(128 * 2**20 // 4)
    time.sleep(0.05)
    del y
print(held.peak, held.current, freed.peak, freed.current, held.source.replace(" ", "_"), str(held))
"""


def test_measure_memory_sees_held_and_freed_tensors_on_cpu():
    # A fresh process: memory earlier tests freed stays in this one's allocator and would serve the tensors.
    out = subprocess.run([sys.executable, "-c", RSS_PROBE], capture_output=True, text=True, timeout=120, check=True)
    held_peak, held_current, freed_peak, freed_current, source, shown = out.stdout.split(maxsplit=5)
    assert source.startswith("process_RSS")
    assert int(held_peak) >= 0.8 * 64 * 2**20 and int(held_current) >= 0.8 * 64 * 2**20
    assert int(freed_peak) >= 0.8 * 128 * 2**20
    assert int(freed_current) < int(freed_peak)
    assert "MiB" in shown


def test_tensor_bytes_counts_shared_storage_once():
    a = torch.zeros(10, dtype=torch.float32)
    assert helpers.tensor_bytes(a, [a, {"x": a}], (torch.zeros(4, dtype=torch.bfloat16),)) == 40 + 8


def test_is_oom_recognises_out_of_memory_errors_only():
    assert helpers.is_oom(torch.OutOfMemoryError("CUDA out of memory"))
    assert helpers.is_oom(RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried... out of memory"))
    assert helpers.is_oom(MemoryError())
    assert not helpers.is_oom(RuntimeError("shape mismatch"))
    assert not helpers.is_oom(ValueError("out of memory"))
    helpers.free_memory("cpu")
