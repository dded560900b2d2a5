"""Child processes the lab starts (a server, torchrun and its ranks): kept track of while they run and always
stopped, by the code that started them on its way out, or else when the interpreter exits."""

from __future__ import annotations

import atexit
import contextlib

import psutil

_LIVE: set[psutil.Process] = set()  # stopped at interpreter exit if the code that started them never cleaned up


def family(root: psutil.Process) -> set[psutil.Process]:
    """`root` and every process below it that is still there (none if `root` is gone)."""
    with contextlib.suppress(psutil.Error):
        return {root, *root.children(recursive=True)}
    return set()


def track(processes: set[psutil.Process]) -> None:
    """Keep `processes` to stop at interpreter exit, should the code that started them not get to."""
    _LIVE.update(processes)


def stop(processes: set[psutil.Process], grace_s: float = 3.0) -> None:
    """SIGTERM every process of `processes` still running, then SIGKILL the ones left after `grace_s`."""
    alive = [p for p in processes if p.is_running()]
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, left = psutil.wait_procs(alive, timeout=grace_s)
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.kill()
    psutil.wait_procs(left, timeout=grace_s)
    _LIVE.difference_update(processes)


@atexit.register
def _stop_all() -> None:
    stop(set(_LIVE), grace_s=1.0)
