"""The setup every notebook's first cell runs: seed, device, dtype, profile, versions (`course.lab` adds the
measured ceilings)."""

from __future__ import annotations

import gc
import platform
from dataclasses import dataclass

import pandas as pd
import torch
import tqdm
import transformers

from .contention import measure_now, watch_cells
from .device import default_dtype, device_name, pick_device
from .hub import hub_offline_by_choice, hub_unavailable
from .profile import current_profile
from .seat import find_seat, gpu_seat, use_seat_threads


@dataclass(frozen=True)
class Runtime:
    """Where and how this notebook runs: device, dtype, profile."""

    device: torch.device
    dtype: torch.dtype
    profile: str

    @property
    def on_gpu(self) -> bool:
        """True on a CUDA device."""
        return self.device.type == "cuda"

    def title(self, what: str) -> str:
        """A plot title that says what was measured, on which device, in which profile."""
        return f"{what}: {device_name(self.device)} [{self.profile}]"


def setup(seed: int = 0, verbose: bool = True) -> Runtime:
    """Seed torch, choose device, dtype and profile, and print them with the library versions."""
    torch.manual_seed(seed)
    # tqdm starts a monitor thread (TMonitor) with its first bar; it wakes every 10 s and takes tqdm's lock, and
    # in a notebook refreshes a widget bar from that thread. A thread a cell leaves running is a way to hang
    # a kernel between cells (tqdm's tracker lists such deadlocks), and the lab's bars need no monitor.
    tqdm.tqdm.monitor_interval = 0
    # Everything imported so far (torch, transformers: ~400k objects) lives for the whole session. Freezing it
    # keeps Python's full garbage collections, which can land in the middle of a timed loop, at microseconds
    # instead of ~0.2 s each. It takes no lock and starts no thread, so it cannot hang a kernel by itself.
    gc.freeze()
    watch_cells()  # each cell's contention, for the self-checks
    seat = find_seat()
    use_seat_threads(seat)  # as many threads as the seat's cores, unless the learner chose them
    device = pick_device()
    runtime = Runtime(device, default_dtype(device), current_profile())
    if verbose:
        seat_rows = gpu_seat(device) if device.type == "cuda" else {}
        info = {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": f"{device} - {device_name(device)}",
            "dtype": str(runtime.dtype).removeprefix("torch."),
            "torch threads": torch.get_num_threads(),
            **seat.describe(),
            **seat_rows,
            "other processes now": busy_now(),
            "profile (LAB_PROFILE)": runtime.profile,
            "Hugging Face Hub": hub_status(),
            "seed": seed,
        }
        print(pd.Series(info).to_string())
    return runtime


def busy_now(seconds: float = 0.5) -> str:
    """What the rest of the machine is doing over the next `seconds`, in words: a busy seat is named at once."""
    found = measure_now(seconds)
    share = f"{found.others_share:.0%} of the machine's CPU"
    return share + (": busy, checks may not decide" if found.busy else "")


def hub_status() -> str:
    """Whether load_model can download pretrained weights, in words."""
    if hub_offline_by_choice():
        return "offline (HF_HUB_OFFLINE): cached weights, else random ones"
    return "unreachable: cached weights, else random ones" if hub_unavailable() else "reachable"
