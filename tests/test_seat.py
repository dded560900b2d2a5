"""The seat: CPUs and memory read from the process's own cgroup (v1 and v2, tightest over its parents), from
fixture files where this machine cannot make such limits, and from a real cgroup quota where it can."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import helpers
from helpers.plumbing import memory, seat

GIB = 2**30


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2_fixture(root: Path) -> tuple[Path, Path]:
    """A TLJH-like seat on cgroup v2: a systemd service under a user slice, the quota and limit on two levels."""
    write(root / "proc_cgroup", "0::/user.slice/user-1000.slice/jupyter-alice.service\n")
    write(root / "mountinfo", "24 1 0:22 / /sys/fs/cgroup rw,nosuid,nodev - cgroup2 cgroup2 rw,nsdelegate\n")
    base = root / "sys/fs/cgroup"
    write(base / "cpu.max", "max 100000")
    write(base / "user.slice/cpu.max", "400000 100000")
    write(base / "user.slice/user-1000.slice/jupyter-alice.service/cpu.max", "150000 100000")
    write(base / "user.slice/memory.max", "max")
    service = base / "user.slice/user-1000.slice/jupyter-alice.service"
    write(service / "memory.max", str(2 * GIB))
    write(service / "memory.current", str(GIB))
    write(service / "memory.stat", f"anon 100\ninactive_file {GIB // 4}\nactive_file 5\n")
    return root / "proc_cgroup", root / "mountinfo"


def test_a_v2_seat_takes_the_tightest_quota_and_limit_over_its_parents(tmp_path):
    proc, mounts = v2_fixture(tmp_path)
    dirs = seat.cgroup_dirs("cpu", proc, mounts, tmp_path)
    assert dirs[0].name == "jupyter-alice.service" and dirs[-1] == tmp_path / "sys/fs/cgroup"
    assert seat.cpu_quota(dirs) == pytest.approx(1.5)
    limit, free = seat.memory_headroom(seat.cgroup_dirs("memory", proc, mounts, tmp_path))
    assert limit == 2 * GIB and free == 2 * GIB - (GIB - GIB // 4)  # inactive file cache is reclaimable
    found = seat.find_seat(proc, mounts, tmp_path)
    assert found.cpu_quota == pytest.approx(1.5) and found.cores == 1
    assert found.memory_limit == 2 * GIB and found.memory_available <= free


def test_a_v1_seat_reads_cfs_quota_and_limit_in_bytes(tmp_path):
    write(tmp_path / "proc_cgroup", "5:memory:/process_api/seat7\n3:cpu,cpuacct:/seat7\n0::/\n")
    write(tmp_path / "mountinfo",
          "30 24 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n"
          "31 24 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n")
    cpu = tmp_path / "sys/fs/cgroup/cpu,cpuacct"
    write(cpu / "cpu.cfs_quota_us", "-1")
    write(cpu / "seat7/cpu.cfs_quota_us", "200000")
    write(cpu / "seat7/cpu.cfs_period_us", "100000")
    mem = tmp_path / "sys/fs/cgroup/memory"
    write(mem / "memory.limit_in_bytes", "9223372036854771712")  # v1's "no limit"
    write(mem / "process_api/seat7/memory.limit_in_bytes", str(4 * GIB))
    write(mem / "process_api/seat7/memory.usage_in_bytes", str(3 * GIB))
    write(mem / "process_api/seat7/memory.stat", f"cache 9\ntotal_inactive_file {GIB}\n")
    found = seat.find_seat(tmp_path / "proc_cgroup", tmp_path / "mountinfo", tmp_path)
    assert found.cpu_quota == 2.0 and found.cores == min(2, found.cpus)
    assert found.memory_limit == 4 * GIB and found.memory_available <= 2 * GIB


def test_no_cgroup_means_no_limits(tmp_path):
    write(tmp_path / "proc_cgroup", "0::/\n")
    write(tmp_path / "mountinfo", "22 1 0:20 / /proc rw - proc proc rw\n")
    found = seat.find_seat(tmp_path / "proc_cgroup", tmp_path / "mountinfo", tmp_path)
    assert found.cpu_quota is None and found.memory_limit is None and found.cores == found.cpus
    absent = seat.find_seat(tmp_path / "nothing", tmp_path / "nothing", tmp_path)
    assert absent.cpu_quota is None


def test_a_namespaced_cgroup_reads_its_mount_as_its_own(tmp_path):
    write(tmp_path / "proc_cgroup", "0::/\n")
    write(tmp_path / "mountinfo", "24 1 0:22 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    write(tmp_path / "sys/fs/cgroup/cpu.max", "50000 100000")  # half a core: one core to run on
    found = seat.find_seat(tmp_path / "proc_cgroup", tmp_path / "mountinfo", tmp_path)
    assert found.cpu_quota == 0.5 and found.cores == 1


def test_unreadable_quota_files_mean_no_quota(tmp_path):
    write(tmp_path / "cpu.max", "garbage")
    write(tmp_path / "cpu.cfs_quota_us", "")
    assert seat.cpu_quota([tmp_path]) is None


def test_torch_threads_follow_the_seat_unless_the_learner_chose(monkeypatch):
    threads = torch.get_num_threads()
    try:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
        one_core = seat.Seat(cpus=os.cpu_count() or 1, cpu_quota=1.0, memory_limit=None, memory_available=GIB,
                             threads_chosen_by="the lab")
        assert seat.use_seat_threads(one_core) == 1
        assert seat.seat_env({})["OMP_NUM_THREADS"] == "1"  # the server and the ranks get the same
        chosen = seat.Seat(os.cpu_count() or 1, 1.0, None, GIB, threads_chosen_by="OMP_NUM_THREADS")
        torch.set_num_threads(2)
        assert seat.use_seat_threads(chosen) == 2  # the learner's choice stands
        assert seat.seat_env({"OMP_NUM_THREADS": "3"})["OMP_NUM_THREADS"] == "3"
    finally:
        torch.set_num_threads(threads)


def test_the_memory_budget_is_capped_by_the_seat(monkeypatch):
    small = seat.Seat(cpus=2, cpu_quota=None, memory_limit=GIB, memory_available=GIB // 2, threads_chosen_by="")
    monkeypatch.setattr(memory, "find_seat", lambda: small)
    held = memory._rss()
    assert memory.memory_budget_bytes() == int(memory.SEAT_SHARE * (held + GIB // 2))
    with pytest.raises(helpers.OverBudget):
        memory.check_budget(GIB)


def test_a_seat_quota_needs_a_positive_core_count():
    with pytest.raises(ValueError, match="cores must be in"):
        with seat.cpu_quota_seat(0):
            pass


def test_a_real_cgroup_quota_is_found_and_throttles_extra_threads():
    """A child process in a cgroup with a 1-core quota sees it, and matmuls on two threads are throttled."""
    code = textwrap.dedent("""
        import time, torch
        from helpers.plumbing import contention, seat
        from helpers.plumbing.seat import cpu_quota_seat
        try:
            ctx = cpu_quota_seat(1)
            group = ctx.__enter__()
        except OSError as error:
            print("SKIP", error); raise SystemExit(0)
        found = seat.find_seat()
        torch.set_num_threads(2)
        x = torch.randn(1024, 1024)
        with contention.watch() as window:
            end = time.perf_counter() + 1.5
            while time.perf_counter() < end:
                x @ x
        ctx.__exit__(None, None, None)
        print("QUOTA", found.cpu_quota, found.cores, window.contention.throttled_share)
    """)
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: a 1-core quota throttles nothing")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    if out.startswith("SKIP"):
        pytest.skip(f"this machine cannot make a cgroup here (needs root and a writable cgroup fs): {out}")
    _, quota, cores, throttled = out.split()
    assert float(quota) == 1.0 and int(cores) == 1
    assert float(throttled) > 0.2  # two busy threads under one core's quota: held back half the time
