"""The setup every notebook's first cell runs: seed, device, dtype, profile, versions."""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import pandas as pd
import torch
import transformers

from .device import default_dtype, device_name, pick_device
from .profile import current_profile


@dataclass(frozen=True)
class Lab:
    """Where and how this notebook runs."""

    device: torch.device
    dtype: torch.dtype
    profile: str

    @property
    def on_gpu(self) -> bool:
        """True on a CUDA device."""
        return self.device.type == "cuda"


def setup(seed: int = 0, verbose: bool = True) -> Lab:
    """Seed torch, choose device, dtype and profile, and print them with the library versions."""
    torch.manual_seed(seed)
    device = pick_device()
    lab = Lab(device, default_dtype(device), current_profile())
    if verbose:
        info = {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "device": f"{device} - {device_name(device)}",
            "dtype": str(lab.dtype).removeprefix("torch."),
            "torch threads": torch.get_num_threads(),
            "profile (LAB_PROFILE)": lab.profile,
            "Hugging Face Hub": "offline (HF_HUB_OFFLINE)" if os.environ.get("HF_HUB_OFFLINE") else "may be used",
            "seed": seed,
        }
        print(pd.Series(info).to_string())
    return lab
