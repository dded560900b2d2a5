"""Run notebooks top to bottom, each in a fresh kernel, and report each one's peak memory.

    python scripts/notebook_memory.py                           # every notebook in notebooks/
    LAB_PROFILE=cpu python scripts/notebook_memory.py --notebooks 00 03 07 --csv /tmp/memory.csv
    python scripts/notebook_memory.py --notebooks 00 --budget-gib 4
    python scripts/notebook_memory.py --notebooks 00 01 --cpus 1 --neighbour   # as a shared JupyterHub seat

`--cpus N` runs the kernels as a seat does: in a cgroup of their own with a CPU quota of N cores (root and a
writable cgroup file system needed). `--neighbour` runs a process that streams memory on the last CPU beside
every notebook, as a classmate's kernel on the same server does.

The kernels get this script's environment (so LAB_PROFILE chooses the profile), with a fresh temporary
LAB_CACHE_DIR unless one is set. While a notebook runs, a thread samples every 0.1 s the resident set size (RSS)
of the kernel and every process it started (servers, torchrun ranks), and that plus this script's own RSS.
Summing RSS counts a page that processes share once per process, so the figures err on the high side.
Every cell runs, also after one fails, so the peak covers the whole notebook; the status counts the cells that
failed (only self-checks, or other errors) and gives the first. The self-checks' outcomes (pass, fail, could not
decide) are counted from the lab's check log, with the most the other processes took of the machine meanwhile.
A notebook whose kernel dies is recorded and the next one runs; the exit status is 1 if any notebook failed or,
with --budget-gib, peaked above the budget.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pandas as pd
import psutil
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError

from helpers.plumbing.checks import read_check_log
from helpers.plumbing.neighbour import neighbour
from helpers.plumbing.seat import cpu_quota_seat

ROOT = Path(__file__).resolve().parent.parent
SAMPLE_EVERY_S = 0.1
GIB = 2**30


@dataclass
class Peaks:
    """Highest RSS seen, in bytes: the kernel with its child processes, and that plus this script."""

    kernel: int = 0
    total: int = 0


def rss(processes: list[psutil.Process]) -> int:
    """Summed resident set size of the processes in bytes; one that has just ended counts zero."""
    total = 0
    for process in processes:
        with suppress(psutil.Error):
            total += process.memory_info().rss
    return total


@contextmanager
def sampling_peaks(every: float = SAMPLE_EVERY_S) -> Iterator[Peaks]:
    """Track peak RSS in a background thread while the block runs."""
    me = psutil.Process()
    peaks = Peaks()
    done = threading.Event()

    def sample() -> None:
        while True:
            # This script starts nothing but the kernel, so its descendants are the kernel and what it started.
            kernel = rss(me.children(recursive=True))
            peaks.kernel = max(peaks.kernel, kernel)
            peaks.total = max(peaks.total, kernel + rss([me]))
            if done.wait(every):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peaks
    finally:
        done.set()
        sampler.join()


def exit_name(code: int | None) -> str:
    """A process's exit status in words: the signal's name (SIGKILL, most likely the OOM killer) or the code."""
    if code is None:
        return "exit status unknown"
    if code < 0:
        with suppress(ValueError):
            return signal.Signals(-code).name
        return f"signal {-code}"
    return f"exit code {code}"


def failure(error: Exception, kernel: subprocess.Popen | None) -> str:
    """One line for a notebook that did not finish: how its kernel died, or the error's first line."""
    if isinstance(error, DeadKernelError):
        return f"kernel died: {exit_name(kernel.poll() if kernel else None)}"
    if isinstance(error, CellExecutionError):
        text = f"{error.ename}: {error.evalue}"
    else:
        text = f"{type(error).__name__}: {error}"
    return text.strip().splitlines()[0]


def cell_errors(nb: nbformat.NotebookNode) -> str:
    """"ok", or how many cells raised and the first error's line ("self-check failed" first when only checks did)."""
    errors = [f"{out.ename}: {out.evalue}".splitlines()[0] for cell in nb.cells if cell.cell_type == "code"
              for out in cell.get("outputs", []) if out.output_type == "error"]
    if not errors:
        return "ok"
    kind = "self-checks failed" if all("Self-check failed" in e for e in errors) else "cells failed"
    return f"{len(errors)} {kind}: {errors[0]}"


def only_self_checks_failed(status: str) -> bool:
    """Whether a `cell_errors` status says that self-checks, and nothing else, failed ("2 self-checks failed: ...")."""
    return re.match(r"\d+ self-checks failed", status) is not None


def check_outcomes(entries: list[dict]) -> dict:
    """Counts of the logged self-check outcomes, and the largest share of the machine other processes took."""
    outcomes = [entry["outcome"] for entry in entries]
    others = [entry.get("contention", {}).get("others_share", 0.0) for entry in entries]
    return {"passed": outcomes.count("pass"), "failed": outcomes.count("fail"),
            "undecided": outcomes.count("undecided"), "others max": round(max(others, default=0.0), 2)}


def run_notebook(path: Path, timeout: int) -> dict:
    """Run one notebook in a fresh kernel (outputs are not written back); return its row of the table."""
    logged = len(read_check_log())
    nb = nbformat.read(path, as_version=4)
    resources = {"metadata": {"path": str(path.parent)}}
    # every cell runs, also after one fails, so the peak covers the whole notebook
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources=resources, allow_errors=True)
    kernel = []  # the kernel's Popen, kept to read how it ended after nbclient has let go of it
    client.on_notebook_start = lambda notebook: kernel.append(client.km.provisioner.process)
    marks = []  # (cell index, the peak so far) as each cell finishes: the first to reach the final peak set it
    client.on_cell_complete = lambda cell, cell_index, **_: marks.append((cell_index, peaks.kernel))
    start = time.perf_counter()
    with sampling_peaks() as peaks:
        try:
            client.execute()
            status = cell_errors(nb)
        except Exception as error:  # recorded in the table; the next notebook still runs
            status = failure(error, kernel[0] if kernel else None)
    return {
        "notebook": path.name,
        "profile": os.environ.get("LAB_PROFILE") or "(by device)",
        "seconds": round(time.perf_counter() - start, 1),
        "peak kernel GiB": round(peaks.kernel / GIB, 2),  # the kernel and its child processes
        "peak total GiB": round(peaks.total / GIB, 2),  # and this script
        "peak cell": next((index for index, peak in marks if peak == peaks.kernel), None),
        **check_outcomes(read_check_log()[logged:]),
        "status": status,
    }


@contextmanager
def seat_of(cpus: float) -> Iterator[None]:
    """This script and the kernels it starts limited to `cpus` cores: a cgroup CPU quota where this machine
    allows one (as a JupyterHub seat is), else the CPU affinity of the first CPUs (a neighbour takes the last)."""
    with ExitStack() as stack:
        allowed = os.sched_getaffinity(0)
        try:
            stack.enter_context(cpu_quota_seat(cpus))
            print(f"seat: a cgroup CPU quota of {cpus:g} cores", flush=True)
        except OSError as error:
            print(f"seat: no cgroup quota here ({error}); limiting the CPU affinity instead", flush=True)
            os.sched_setaffinity(0, set(sorted(allowed)[:max(1, math.ceil(cpus))]))
            stack.callback(os.sched_setaffinity, 0, allowed)
        yield


def main(argv: list[str] | None = None) -> int:
    """Run the chosen notebooks, print the memory table, and say which notebooks failed or broke the budget."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebooks", nargs="*", default=[], help="number prefixes to run, e.g. 00 03 (default all)")
    parser.add_argument("--notebook-dir", type=Path, default=ROOT / "notebooks", help="where the notebooks are")
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds allowed per cell; a notebook whose cell times out runs once more")
    parser.add_argument("--budget-gib", type=float, help="exit 1 if a notebook's peak kernel RSS is above this")
    parser.add_argument("--checks-report-only", action="store_true",
                        help="a notebook whose only failures are self-checks is reported, not failed")
    parser.add_argument("--csv", type=Path, help="also write the table to this CSV file")
    parser.add_argument("--cpus", type=float, help="run the kernels under a cgroup CPU quota of this many cores")
    parser.add_argument("--neighbour", action="store_true", help="stream memory on the last CPU beside each notebook")
    args = parser.parse_args(argv)

    every = sorted(args.notebook_dir.glob("*.ipynb"))
    paths = [p for p in every if p.name[:2] in args.notebooks] if args.notebooks else every
    if not paths:
        parser.error(f"--notebooks matched nothing among {[p.name[:2] for p in every]} in {args.notebook_dir}")
    os.environ["LAB_CACHE_DIR"] = os.environ.get("LAB_CACHE_DIR") or tempfile.mkdtemp(prefix="lab-memory-")

    rows = []
    with ExitStack() as stack:
        if args.neighbour:  # started first, so that the seat's quota does not cover it
            stack.enter_context(neighbour())
        if args.cpus:
            stack.enter_context(seat_of(args.cpus))
        for path in paths:
            print(f"running {path.name} ...", flush=True)
            rows.append(run_notebook(path, args.timeout))
            if rows[-1]["status"].startswith("CellTimeoutError"):  # a kernel's reply lost on its socket hangs a cell
                print(f"  {rows[-1]['status']}: running {path.name} once more", flush=True)
                rows[-1] = run_notebook(path, args.timeout)
            row = rows[-1]
            print(f"  {row['seconds']} s, peak {row['peak kernel GiB']} GiB, checks {row['passed']} passed, "
                  f"{row['failed']} failed, {row['undecided']} undecided, {row['status']}", flush=True)
    table = pd.DataFrame(rows).assign(cpus=args.cpus or "all", neighbour=args.neighbour)
    print(table.to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)

    tolerated = table["status"].map(only_self_checks_failed) & args.checks_report_only
    failed = table[(table["status"] != "ok") & ~tolerated]
    for row in table[(table["status"] != "ok") & tolerated].to_dict("records"):
        print(f"SELF-CHECKS FAILED (reported only): {row['notebook']}: {row['status']}")
    over = table[table["peak kernel GiB"] > args.budget_gib] if args.budget_gib is not None else table.iloc[:0]
    for row in failed.to_dict("records"):
        print(f"FAILED: {row['notebook']}: {row['status']}")
    for row in over.to_dict("records"):
        print(f"OVER BUDGET: {row['notebook']} peaked at {row['peak kernel GiB']} GiB, above {args.budget_gib} GiB")
    return 1 if len(failed) or len(over) else 0


if __name__ == "__main__":
    raise SystemExit(main())
