"""Chapter 10: the course's arithmetic for tensor parallelism (the alpha-beta fit, a rank's share of the model,
the collectives a plan implies, the spec-sheet step, the pipeline bubble), bad arguments, and real torchrun
launches of tiny scripts: results collected, a failing rank named, a timeout kept, no process left behind."""

import json
import os
import textwrap
import time
from dataclasses import asdict, replace

import numpy as np
import pandas as pd
import psutil
import pytest

import helpers
from helpers.course.parallel import (
    LINKS,
    AlphaBeta,
    RankError,
    TPPlan,
    bubble_fraction,
    comm_terms,
    fit_alpha_beta,
    fit_errors,
    launch,
    operator_kind,
    pipeline_schedule,
    profile_by_kind,
    rank_spec,
    run_ranks,
    script_path,
    shared_calibration,
    side_by_side,
    slowest_of,
    spec_tp_step,
    step_table,
    threads_per_rank,
    tp_step_breakdown,
    usable_cores,
)
from helpers.course.parallel.launch import SCRIPTS
from helpers.course.step_time import CalibratedStepCost
from helpers.course.step_time.calibration import calibration_from_dict
from tests.test_step_model import fake_calibration

LLAMA8 = helpers.model_spec("llama-3-8b")
TINY = helpers.architecture_spec(LLAMA8, n_layers=2, d_model=256, n_heads=4, n_kv_heads=2, head_dim=64, d_ff=512,
                                 vocab_size=1024, max_positions=512, name="tiny-llama")
CAL = fake_calibration()


# ---------------------------------------------------------------- the course's arithmetic


def test_alpha_beta_fit_recovers_latency_and_bandwidth():
    nbytes = 4 ** np.arange(1, 12)
    truth = AlphaBeta(150e-6, 2e9)
    fit = fit_alpha_beta(nbytes, [truth(n) for n in nbytes])
    assert fit.alpha_s == pytest.approx(150e-6, rel=1e-6)
    assert fit.bandwidth == pytest.approx(2e9, rel=1e-6)
    assert np.abs(fit_errors(fit, nbytes, [truth(n) for n in nbytes])).max() < 1e-9


def test_alpha_beta_fit_weighs_every_size_alike():
    # one size 30% slow: a relative fit keeps every other point within a few per cent
    nbytes = 4 ** np.arange(1, 12)
    times = np.array([AlphaBeta(100e-6, 1e9)(n) for n in nbytes])
    times[5] *= 1.3
    errors = np.abs(fit_errors(fit_alpha_beta(nbytes, times), nbytes, times))
    assert np.median(errors) < 0.05


def test_alpha_beta_fit_keeps_both_terms_non_negative():
    flat = fit_alpha_beta([10, 1000, 100000], [2e-4, 2e-4, 2e-4])  # no bandwidth term to see
    assert flat.alpha_s == pytest.approx(2e-4) and flat.bandwidth == np.inf
    pure = fit_alpha_beta([1e3, 1e6], [0.5e-6, 1e-3])  # a line through them would start below zero
    assert pure.alpha_s == 0 and 1e9 < pure.bandwidth < 2e9  # between the two points' own rates


@pytest.mark.parametrize("nbytes, seconds", [([1], [1e-3]), ([1, 2], [1e-3]), ([1, 2], [1e-3, 0.0]),
                                             ([-1, 2], [1e-3, 2e-3])])
def test_alpha_beta_fit_refuses_bad_points(nbytes, seconds):
    with pytest.raises(ValueError, match="nbytes|seconds"):
        fit_alpha_beta(nbytes, seconds)


def test_alpha_beta_refuses_bad_figures():
    with pytest.raises(ValueError, match="alpha_s"):
        AlphaBeta(-1e-6, 1e9)
    with pytest.raises(ValueError, match="bandwidth"):
        AlphaBeta(1e-6, 0)
    with pytest.raises(ValueError, match="nbytes"):
        AlphaBeta(1e-6, 1e9)(-5)


def test_ring_collectives_over_a_link():
    nvlink = LINKS["NVLink 4 (H100 SXM)"]
    # two GPUs: each sends half the message and receives the other half, twice -> the message at link speed
    assert nvlink.allreduce(2).bandwidth == pytest.approx(nvlink.bandwidth)
    assert nvlink.allreduce(4).bandwidth == pytest.approx(nvlink.bandwidth * 4 / 6)
    assert nvlink.allgather(2).bandwidth == pytest.approx(2 * nvlink.bandwidth)
    with pytest.raises(ValueError, match="tp"):
        nvlink.allreduce(0)


def test_rank_spec_splits_heads_mlp_and_vocabulary():
    half = rank_spec(LLAMA8, 2)
    assert (half.n_heads, half.n_kv_heads, half.d_ff, half.vocab_size) == (16, 4, 7168, 64128)
    assert (half.d_model, half.head_dim, half.n_layers) == (LLAMA8.d_model, LLAMA8.head_dim, LLAMA8.n_layers)
    norms = LLAMA8.n_layers * 2 * LLAMA8.d_model + LLAMA8.d_model  # replicated on every rank
    assert half.n_params == pytest.approx((LLAMA8.n_params - norms) / 2 + norms)
    assert rank_spec(LLAMA8, 1) is LLAMA8


@pytest.mark.parametrize("spec, tp, argument", [(LLAMA8, 3, "tp"), (LLAMA8, 16, "tp"), (LLAMA8, 0, "tp"),
                                                (helpers.model_spec("gpt2"), 2, "spec"),
                                                (helpers.model_spec("mixtral-8x7b"), 2, "spec")])
def test_rank_spec_refuses_what_does_not_split(spec, tp, argument):
    with pytest.raises(ValueError, match=argument):
        rank_spec(spec, tp)


def test_tp_plan_read_from_transformers_plans():
    old = {"lm_head": "colwise_gather_output", "model.layers.*.self_attn.o_proj": "rowwise",
           "model.layers.*.mlp.down_proj": "rowwise", "model.layers.*.mlp.up_proj": "colwise"}
    assert TPPlan.from_plan(old) == TPPlan(2, False, True)
    assert TPPlan.from_plan({"model.embed_tokens": "embedding_rowwise", **old}) == TPPlan(2, True, True)
    assert TPPlan(2, True, True).allreduces(32) == 65
    installed = TPPlan.of(TINY)  # whichever transformers is installed: 2 per layer and a gathered head
    assert installed.layer_allreduces == 2 and installed.head_gather


def test_comm_terms_are_the_plans_collectives():
    ar, ag = AlphaBeta(100e-6, 1e9), AlphaBeta(50e-6, 2e9)
    rows = comm_terms(TINY, 2, tokens=8, sequences=8, bytes_per_elem=4, allreduce=ar, allgather=ag,
                      plan=TPPlan(2, True, True))
    message, logits = 8 * 256 * 4, 8 * 1024 * 4
    assert rows[0]["time_s"] == pytest.approx(5 * (100e-6 + message / 1e9))  # 2 x 2 layers + the embedding
    assert rows[1]["time_s"] == pytest.approx(50e-6 + logits / 2e9)
    assert comm_terms(TINY, 1, 8, 8, 4, ar, ag) == []


def test_tp2_step_is_the_narrow_model_plus_collectives():
    ar = AlphaBeta(100e-6, 1e9)
    table = tp_step_breakdown(TINY, 2, 4, 64, CAL, ar, plan=TPPlan(2, False, False))
    compute = table[table.part == "compute"].time_s.sum()
    assert compute == pytest.approx(CalibratedStepCost(rank_spec(TINY, 2), CAL)([(1, 64)] * 4))
    assert table[table.part == "communication"].time_s.sum() == pytest.approx(4 * ar(4 * 256 * 4))
    with pytest.raises(ValueError, match="allreduce"):
        tp_step_breakdown(TINY, 2, 4, 64, CAL)


def test_shared_calibration_caps_each_rate_at_the_machines_share():
    # one thread streams 10 GB/s alone, the whole machine 12 GB/s: two ranks at once get 6 GB/s each
    machine = replace(CAL, read_bandwidth=1.2e10, matmul_flops={k: tuple(2 * r for r in v)
                                                                for k, v in CAL.matmul_flops.items()})
    shared = shared_calibration(CAL, machine, 2)
    assert shared.read_bandwidth == pytest.approx(6e9)
    assert shared.matmul_flops == CAL.matmul_flops  # twice the rate on twice the threads: each keeps its own
    assert shared.cache_bandwidth == pytest.approx(CAL.cache_bandwidth / 2)  # same rate on one thread or two
    assert shared.op_overhead_s == CAL.op_overhead_s
    with pytest.raises(ValueError, match="nproc"):
        shared_calibration(CAL, machine, 0)


def test_slowest_of_takes_each_rate_from_the_slower_rank():
    """Course arithmetic: rank 1 streams slower, rank 0 calls operators slower; the joined calibration has both."""
    slow_stream = replace(CAL, read_bandwidth=CAL.read_bandwidth / 2,
                          matmul_flops={k: tuple(r / 2 for r in v) for k, v in CAL.matmul_flops.items()})
    slow_calls = replace(CAL, op_overhead_s={k: 2 * v for k, v in CAL.op_overhead_s.items()})
    slow_stream = replace(slow_stream, stream_bytes=(1e6, 6e7), stream_bandwidth=(1e10, 2e10), attention_flops=1e9,
                          measured={"probe": 2.0})
    slow_calls = replace(slow_calls, stream_bytes=(1e6, 6e7), stream_bandwidth=(2e10, 1e10), expert_call_s=1e-4,
                         measured={"probe": 1.0})
    joined = slowest_of([slow_calls, slow_stream])
    assert joined.read_bandwidth == slow_stream.read_bandwidth and joined.matmul_flops == slow_stream.matmul_flops
    assert joined.op_overhead_s == slow_calls.op_overhead_s and joined.expert_call_s == 1e-4
    assert joined.stream_bandwidth == (1e10, 1e10) and joined.attention_flops == 1e9
    assert joined.cache_bandwidth == CAL.cache_bandwidth and joined.measured == {"probe": 2.0}
    with pytest.raises(ValueError, match="calibrations"):
        slowest_of([])


def test_a_calibration_survives_its_json_form():
    """What a rank script returns (asdict, through JSON) is the same Calibration again."""
    cal = replace(CAL, stream_bytes=(1e6, 6e7), stream_bandwidth=(1e10, 2e10), measured={"probe": 1.5})
    assert calibration_from_dict(json.loads(json.dumps(asdict(cal)))) == cal


def test_a_cgroup_quota_caps_the_usable_cores(tmp_path):
    cpu_max = tmp_path / "cpu.max"
    for text, cores in (("max 100000", None), ("150000 100000", 1), ("400000 100000", 4), ("", None)):
        cpu_max.write_text(text)
        assert launch.cgroup_cores(cpu_max) == cores
    assert launch.cgroup_cores(tmp_path / "absent") is None
    assert 1 <= usable_cores() <= (os.cpu_count() or 1)


def test_profile_by_kind_adds_up_each_part_of_a_step():
    """Course arithmetic: profiled operators grouped into collectives, DTensor's work, products and the rest."""
    profile = pd.DataFrame({"operator": ["aten::mm", "c10d::allreduce_", "_c10d_functional::wait_tensor",
                                         "Redistribute", "PythonSubclass", "aten::add", "aten::addmm"],
                            "self_ms": [2.0, 1.0, 0.5, 0.25, 0.25, 0.1, 0.5], "calls": [29, 9, 2, 2, 3, 40, 1]})
    kinds = profile_by_kind(profile)
    assert kinds.self_ms.to_dict() == pytest.approx({"matrix products": 2.5, "collectives": 1.5,
                                                     "DTensor: wrapping, redistributing": 0.5,
                                                     "other operators": 0.1})
    assert kinds.index[0] == "matrix products" and list(kinds.columns) == ["self_ms"]
    assert operator_kind("aten::bmm") == "matrix products" and operator_kind("gloo:all_reduce") == "collectives"
    with pytest.raises(ValueError, match="profile"):
        profile_by_kind(pd.DataFrame([]))


def test_spec_sheet_pair_wins_for_a_large_model_and_loses_for_a_tiny_one():
    h100, nvlink = helpers.gpu_spec("H100 SXM"), LINKS["NVLink 4 (H100 SXM)"]
    big = [spec_tp_step(LLAMA8, tp, 1, 1024, h100, nvlink)["step_s"] for tp in (1, 2)]
    assert big[1] < 0.75 * big[0]  # half the weights each; 64 all-reduces of 8 KB cost far less
    small = [spec_tp_step(TINY, tp, 1, 64, h100, nvlink)["step_s"] for tp in (1, 2)]
    assert small[1] > small[0]  # microseconds of weights, tens of microseconds of latency


def test_step_table_splits_waiting_from_transfer():
    # rank 1 enters the all-reduce 2 ms after rank 0; it finishes 1 ms later for both
    rank0 = [{"start": 0.0, "end": 0.010, "calls": [["all_reduce", 0.003, 0.006, 64]]}]
    rank1 = [{"start": 0.0, "end": 0.010, "calls": [["all_reduce", 0.005, 0.006, 64]]}]
    table = step_table([rank0, rank1]).set_index("rank")
    assert table.all_reduce_wait_s.tolist() == pytest.approx([0.002, 0.0])
    assert table.all_reduce_transfer_s.tolist() == pytest.approx([0.001, 0.001])
    assert table.compute_s.tolist() == pytest.approx([0.007, 0.009])
    with pytest.raises(ValueError, match="ranks"):
        step_table([rank0, rank1 * 2])


def test_pipeline_bubble():
    assert bubble_fraction(4, 8) == pytest.approx(3 / 11)
    assert bubble_fraction(1, 5) == 0
    schedule = pipeline_schedule(3, 2)
    busy = (schedule.end - schedule.start).sum()
    assert 1 - busy / (3 * schedule.end.max()) == pytest.approx(bubble_fraction(3, 2))
    with pytest.raises(ValueError, match="micro_batches"):
        bubble_fraction(4, 0)


def test_threads_and_cores():
    assert threads_per_rank(2, cores=2) == 1 and threads_per_rank(2, cores=16) == 8 and threads_per_rank(4, 2) == 1
    assert side_by_side(2, cores=1)[0] is False and "1 core" in side_by_side(2, cores=1)[1]
    assert side_by_side(2, cores=2)[0] is True
    with pytest.raises(ValueError, match="nproc"):
        threads_per_rank(0)


# ---------------------------------------------------------------- the launcher


@pytest.mark.parametrize("kwargs, argument", [(dict(nproc=0), "nproc"), (dict(timeout_s=0), "timeout_s"),
                                              (dict(threads=0), "threads")])
def test_launcher_refuses_bad_arguments(kwargs, argument):
    with pytest.raises(ValueError, match=argument):
        run_ranks(script_path("allreduce_sweep"), **kwargs)


def test_launcher_refuses_a_missing_script(tmp_path):
    with pytest.raises(ValueError, match="script"):
        run_ranks(tmp_path / "nothing.py")
    with pytest.raises(ValueError, match="name"):
        script_path("no_such_script")


RANK_SCRIPT = """
import os, sys, time
sys.path.insert(0, {scripts!r})
import rank_common


def main(args):
    import torch
    import torch.distributed as dist

    rank, world = rank_common.start(timeout_s=20)
    open(os.path.join(args["pids"], f"rank{{rank}}"), "w").write(str(os.getpid()))
    if args["mode"] == "fail" and rank == 1:
        raise ValueError("rank one refuses")
    if args["mode"] == "hang":
        time.sleep(60)
    x = torch.tensor([float(rank + 1)])
    dist.all_reduce(x)
    return {{"rank": rank, "world": world, "sum": x.item(), "threads": torch.get_num_threads()}}


if __name__ == "__main__":
    rank_common.run(main)
"""


@pytest.fixture
def tiny_script(tmp_path):
    path = tmp_path / "tiny_rank.py"
    path.write_text(textwrap.dedent(RANK_SCRIPT.format(scripts=str(SCRIPTS))))
    (tmp_path / "pids").mkdir()
    return path


def gone(pid: int, within_s: float = 5.0) -> bool:
    """Whether process `pid` has exited (or is a zombie its parent has yet to reap) within `within_s`."""
    deadline = time.perf_counter() + within_s
    while time.perf_counter() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def rank_pids(tmp_path) -> list[int]:
    return [int(p.read_text()) for p in sorted((tmp_path / "pids").iterdir())]


def test_two_ranks_return_their_results(tiny_script, tmp_path):
    results = run_ranks(tiny_script, {"mode": "ok", "pids": str(tmp_path / "pids")}, nproc=2, timeout_s=60)
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["world"] == 2 and r["sum"] == 3.0 and r["threads"] == threads_per_rank(2) for r in results)
    assert all(gone(pid) for pid in rank_pids(tmp_path))


def test_a_failing_rank_is_named_and_reaped(tiny_script, tmp_path):
    with pytest.raises(RankError, match=r"rank 1 of 2 failed(.|\n)*rank one refuses"):
        run_ranks(tiny_script, {"mode": "fail", "pids": str(tmp_path / "pids")}, nproc=2, timeout_s=60)
    pids = rank_pids(tmp_path)
    assert pids and all(gone(pid) for pid in pids)


def test_an_interrupt_stops_every_rank(tiny_script, tmp_path, monkeypatch):
    family, pressed = launch.family, []

    def interrupt_once_ranks_run(root):  # Ctrl-C in the notebook, once both ranks have started
        if not pressed and len(list((tmp_path / "pids").iterdir())) == 2:
            pressed.append(True)
            raise KeyboardInterrupt
        return family(root)

    monkeypatch.setattr(launch, "family", interrupt_once_ranks_run)
    with pytest.raises(KeyboardInterrupt):
        run_ranks(tiny_script, {"mode": "hang", "pids": str(tmp_path / "pids")}, nproc=2, timeout_s=60)
    pids = rank_pids(tmp_path)
    assert len(pids) == 2 and all(gone(pid) for pid in pids)


def test_a_timeout_stops_every_rank(tiny_script, tmp_path):
    start = time.perf_counter()
    with pytest.raises(RankError, match="did not finish within timeout_s=12"):
        run_ranks(tiny_script, {"mode": "hang", "pids": str(tmp_path / "pids")}, nproc=2, timeout_s=12)
    assert time.perf_counter() - start < 30
    pids = rank_pids(tmp_path)
    assert len(pids) == 2 and all(gone(pid) for pid in pids)
