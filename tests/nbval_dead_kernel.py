"""nbval plugin: a notebook whose kernel dies fails in seconds, naming the cell and how the kernel ended.

nbval waits for a cell's reply with one long `get_message(timeout=--nbval-cell-timeout)`, and a dead kernel
never replies, so a kernel killed by the out-of-memory killer used to cost the whole cell timeout (600 s here).
This plugin makes each kernel's waits poll in one-second slices and check the kernel's process between them;
once the process is gone the cell fails with its exit status, and the notebook's later cells are skipped.
The root conftest.py loads it for every run.
"""

from __future__ import annotations

import contextlib
import signal
import time
from queue import Empty

import pytest
from nbval.kernel import RunningKernel
from nbval.plugin import IPyNbCell, NbCellError

SLICE_S = 1.0  # how often a waiting cell checks that its kernel is still alive


class KernelDied(Exception):
    """The kernel process ended while a cell waited for it; the message says how."""


def exit_status(kernel: RunningKernel) -> str:
    """How the kernel process ended: its signal (SIGKILL is most likely the out-of-memory killer) or code."""
    process = getattr(getattr(kernel, "km", None), "provisioner", None)
    process = getattr(process, "process", None)  # the kernel's subprocess.Popen
    code = process.poll() if process is not None else None
    if code is None:
        return "kernel died (exit status unknown)"
    if code == -signal.SIGKILL:
        return "kernel killed by SIGKILL (the out-of-memory killer, most likely: memory)"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"kernel killed by {signal.Signals(-code).name}"
        return f"kernel killed by signal {-code}"
    return f"kernel exited with code {code}"


def watch(kernel: RunningKernel) -> None:
    """Make every message wait of this kernel poll in slices and raise KernelDied once its process is gone."""
    if getattr(kernel, "watched", False):
        return
    get_message = kernel.get_message

    def get_message_or_die(stream: str, timeout: float | None = None) -> dict:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = SLICE_S if deadline is None else max(0.0, min(SLICE_S, deadline - time.monotonic()))
            try:
                return get_message(stream, timeout=left)
            except Empty:
                if not kernel.is_alive():
                    raise KernelDied(exit_status(kernel)) from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    kernel.get_message = get_message_or_die
    kernel.watched = True


def first_line(source: str) -> str:
    """The cell's first non-blank line, to name it in a message."""
    return next((line.strip() for line in source.splitlines() if line.strip()), "")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """Run an nbval cell with its kernel watched; after the kernel dies, skip the notebook's later cells."""
    if not isinstance(item, IPyNbCell):
        return (yield)
    notebook = item.parent
    if getattr(notebook, "kernel_death", None):
        pytest.skip(f"not run: {notebook.kernel_death}")
    kernel = notebook.kernel
    watch(kernel)
    where = f"cell {item.cell_num} (`{first_line(item.cell.source)}`) of {item.nodeid.split('::')[0]}"
    try:
        if hasattr(kernel, "km") and not kernel.is_alive():  # died after the previous cell finished
            raise KernelDied(exit_status(kernel))
        return (yield)
    except KernelDied as died:
        notebook.kernel_death = f"{died} in {where}"
        with contextlib.suppress(Exception):  # release its channels and files; the process is gone already
            kernel.stop()
        raise NbCellError(item.cell_num, f"{died} while running {where}", item.cell.source) from None
