"""What every rank script of chapter 10 shares (imported by file, next to the scripts, so a rank loads no more
than it needs): its arguments, its threads, the process group with a timeout on every collective, and its result
or traceback, written where the launcher (`helpers.course.parallel.launch`) reads them."""

from __future__ import annotations

import json
import os
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import psutil

ARGS_ENV, RESULTS_ENV, THREADS_ENV = "LAB_RANK_ARGS", "LAB_RANK_RESULTS", "LAB_RANK_THREADS"


def rank() -> int:
    """This process's rank (torchrun sets RANK)."""
    return int(os.environ.get("RANK", "0"))


def arguments() -> dict:
    """The arguments the launcher wrote for every rank."""
    return json.loads(Path(os.environ[ARGS_ENV]).read_text())


def _results() -> Path:
    return Path(os.environ[RESULTS_ENV])


def start(timeout_s: float, device: str = "cpu") -> tuple[int, int]:
    """Set this rank's threads, join the process group (gloo on CPU, NCCL on CUDA) with `timeout_s` on every
    collective; return (rank, world size)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(int(os.environ.get(THREADS_ENV, "1")))
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device == "cuda" else "gloo", timeout=timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def run(main: Callable[[dict], dict]) -> None:
    """Run `main(arguments())` on this rank: write its result as JSON, or its traceback, then leave the group.

    The process id and start time are written first, so that the launcher can stop a rank that outlives torchrun."""
    me, results = rank(), _results()
    (results / f"rank{me}.pid").write_text(f"{os.getpid()} {psutil.Process().create_time()}")
    try:
        result = main(arguments())
        partial = results / f"rank{me}.json.part"
        partial.write_text(json.dumps(result))
        partial.rename(results / f"rank{me}.json")
    except BaseException:
        (results / f"rank{me}.error").write_text(f"{time.time()}\n{traceback.format_exc()}")  # when, then what
        raise  # no destroy_process_group: with a peer still inside a collective it could block; the launcher stops us
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
