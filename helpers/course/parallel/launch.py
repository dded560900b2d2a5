"""Chapter 10, the launcher: run a Python script as `nproc` ranks under torchrun, collect each rank's result, and
always stop every process it started.

`run_ranks(script, args)` starts `python -m torch.distributed.run --standalone --nproc-per-node N script` in a
session of its own, hands the ranks `args` (JSON) and a folder for their results, and waits at most `timeout_s`.
torchrun starts each rank in a session of its own too, so one killpg does not reach them: the launcher keeps
the ranks' process ids while they run (and each rank writes its own) and stops them all on the way out, after a
normal exit, a failed rank, a timeout or a kernel interrupt. A rank script uses `scripts/rank_common.py`: it
starts the process group with a timeout on every collective, and writes its result or its traceback."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from ...plumbing.processes import family, stop, track
from ...plumbing.seat import cpu_quota, usable_cores
from ...plumbing.validate import positive, positive_int

SCRIPTS = Path(__file__).parent / "scripts"  # the rank scripts of chapter 10
ARGS_ENV, RESULTS_ENV, THREADS_ENV = "LAB_RANK_ARGS", "LAB_RANK_RESULTS", "LAB_RANK_THREADS"  # read by rank_common


class RankError(RuntimeError):
    """A rank failed, or the ranks did not finish in time; the message carries what they wrote last."""


CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # a container's CPU quota (cgroup v2): "quota period" or "max ..."


def cgroup_cores(path: Path = CGROUP_CPU_MAX) -> int | None:
    """Whole cores one cgroup v2 `cpu.max` file allows (at least 1); None where there is no quota or no such file.
    The seat's tightest quota over every level of this process's cgroup is `plumbing.seat.find_seat`'s."""
    quota = cpu_quota([path.parent]) if path.name == "cpu.max" else None
    return None if quota is None else max(1, int(quota))


def threads_per_rank(nproc: int, cores: int | None = None) -> int:
    """Threads each of `nproc` ranks gets so that they do not fight for cores: cores // nproc, at least 1."""
    return max(1, (cores or usable_cores()) // positive_int("nproc", nproc))


def side_by_side(nproc: int = 2, cores: int | None = None) -> tuple[bool, str]:
    """Whether `nproc` ranks can each have a core of their own here, and why not if they cannot."""
    cores = cores or usable_cores()
    if cores < positive_int("nproc", nproc):
        return False, (f"this machine gives this process {cores} core(s): {nproc} ranks would take turns on them, "
                       "so their timings would measure the sharing, not tensor parallelism")
    return True, f"{cores} cores: {threads_per_rank(nproc, cores)} thread(s) for each of {nproc} ranks"


def script_path(name: str) -> Path:
    """The rank script `name` (e.g. 'allreduce_sweep') of `scripts/`."""
    path = SCRIPTS / f"{name}.py"
    if not path.is_file():
        known = sorted(p.stem for p in SCRIPTS.glob("*.py") if not p.stem.startswith(("_", "rank_common")))
        raise ValueError(f"name must be one of {known}, got {name!r}")
    return path


def _tail(text: str, n_lines: int = 25) -> str:
    return "\n".join(text.splitlines()[-n_lines:])


def _rank_pids(results: Path) -> set[psutil.Process]:
    """The ranks that wrote their process id and start time and still run (one that outlived torchrun is no
    longer its child); the start time keeps a process that got a finished rank's id out of it."""
    found = set()
    for path in results.glob("rank*.pid"):
        with contextlib.suppress(psutil.Error, ValueError, OSError):
            pid, started = path.read_text().split()
            process = psutil.Process(int(pid))
            if abs(process.create_time() - float(started)) < 0.01:
                found.add(process)
    return found


def _collect(results: Path, nproc: int, returncode: int, log: str) -> list[dict]:
    """Each rank's result, in rank order; a RankError naming the rank that failed first (its peers then fail
    too, their connection gone) with its traceback, and the others' last line."""
    failed = []  # (when, rank, traceback): rank_common writes the time of the failure on the first line
    for path in results.glob("rank*.error"):
        when, _, trace = path.read_text(errors="replace").partition("\n")
        failed.append((float(when), int(path.stem.removeprefix("rank")), trace))
    if failed:
        (_, rank, trace), *after = sorted(failed)
        then = "".join(f"\nthen rank {r}: {_tail(t, 1)}" for _, r, t in after)
        raise RankError(f"rank {rank} of {nproc} failed:\n{_tail(trace)}{then}")
    missing = [rank for rank in range(nproc) if not (results / f"rank{rank}.json").exists()]
    if returncode or missing:
        raise RankError(f"torchrun exited with code {returncode}; rank(s) {missing or 'all'} wrote no result. "
                        f"Its output ends with:\n{_tail(log)}")
    return [json.loads((results / f"rank{rank}.json").read_text()) for rank in range(nproc)]


def run_ranks(script: str | Path, args: dict | None = None, nproc: int = 2, timeout_s: float = 120.0,
              threads: int | None = None) -> list[dict]:
    """Run `script` as `nproc` ranks under torchrun; return each rank's result (a dict), rank 0 first.

    `args` reach every rank as JSON (`rank_common.arguments()`); `threads` per rank defaults to
    `threads_per_rank(nproc)`. Raises RankError with the failing rank's traceback, or when the ranks take longer
    than `timeout_s` in all (startup included). Every process started is stopped before this returns or raises."""
    script = Path(script)
    if not script.is_file():
        raise ValueError(f"script must be an existing Python file, got {str(script)!r}")
    nproc, timeout_s = positive_int("nproc", nproc), positive("timeout_s", timeout_s)
    threads = positive_int("threads", threads) if threads is not None else threads_per_rank(nproc)
    with tempfile.TemporaryDirectory(prefix="lab-ranks-") as tmp:
        results, log_path = Path(tmp), Path(tmp) / "torchrun.log"
        (results / "args.json").write_text(json.dumps(args or {}))
        env = {**os.environ, ARGS_ENV: str(results / "args.json"), RESULTS_ENV: str(results),
               THREADS_ENV: str(threads), "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
               "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               str(script)]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        root = psutil.Process(proc.pid)
        seen = {root}
        track(seen)
        try:
            deadline = time.perf_counter() + timeout_s
            while True:
                seen |= family(root)  # torchrun's ranks, while they are its children
                track(seen)
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise RankError(f"the {nproc} ranks of {script.name} did not finish within timeout_s="
                                    f"{timeout_s:g} s and were stopped. Output so far:\n"
                                    f"{_tail(log_path.read_text(errors='replace'))}")
                try:  # sleeps in the kernel: the ranks being timed have the cores to themselves
                    proc.wait(timeout=min(left, 0.5))
                    break
                except subprocess.TimeoutExpired:
                    pass
        finally:
            stop(seen | family(root) | _rank_pids(results))
        return _collect(results, nproc, proc.returncode, log_path.read_text(errors="replace"))
