"""A neighbour: a process that streams memory on one CPU, as a classmate's kernel on the same server does.

Tests and `scripts/notebook_memory.py --neighbour` start one beside a chapter to show that the lab's self-checks
stay honest when they share the machine: they pass, or say they could not decide, never fail a true lesson.
It is started through a fork, so it is not a child of the process it disturbs: `contention` counts a
process's children as its own work (the lab's server, torchrun's ranks), and a neighbour is not that."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

STREAM = """
import numpy as np, os, sys
if os.fork():
    os._exit(0)
os.setsid()
print(os.getpid(), flush=True)
if {cpu} >= 0 and hasattr(os, "sched_setaffinity"):
    os.sched_setaffinity(0, {{{cpu}}})
a = np.ones({nbytes} // 8); b = np.empty_like(a)
np.copyto(b, a)
print("streaming", flush=True)
sys.stdout.close()
while True:
    np.copyto(b, a); np.copyto(a, b)
"""


@contextmanager
def neighbour(cpu: int | None = None, nbytes: int = 256 * 2**20) -> Iterator[int]:
    """Run a process that copies an `nbytes` buffer back and forth (memory bandwidth and a whole core) on `cpu`
    (default: the last CPU this process may use) for the length of the block; yields its process id and
    always stops it on the way out. Linux and macOS (it forks)."""
    if cpu is None:
        cpu = max(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else -1
    code = STREAM.format(cpu=cpu, nbytes=int(nbytes))
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                          text=True) as launcher:
        pid = int(launcher.stdout.readline() or 0)
        try:
            if not pid or launcher.stdout.readline().strip() != "streaming":
                raise RuntimeError("the neighbour process did not start")
            yield pid
        finally:
            if pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
