"""Run profiles: how big every sweep in the lab is.

- `quick`: the smallest sizes that still show each effect (CI and tests use it).
- `cpu`: sized so a CPU learner finishes a notebook in minutes (the default without a GPU).
- `full`: full curves for a GPU (the default with CUDA).
- `gpu-quick`: a whole-lab pass on one large GPU (scripts/gpu_run.sh): the `full` sizes, except where a
  chapter gives `gpu_quick=` a smaller value so that every chapter fits in a few minutes.

Set `LAB_PROFILE` to choose; every notebook takes its sweep sizes through `by_profile`.
"""

from __future__ import annotations

import os
from typing import TypeVar

from .device import pick_device

PROFILES = ("quick", "cpu", "full", "gpu-quick")
T = TypeVar("T")
_AS_FULL = object()  # by_profile's default for gpu_quick: use the full value


def current_profile() -> str:
    """The active profile: $LAB_PROFILE if set, else `full` on CUDA and `cpu` elsewhere."""
    name = os.environ.get("LAB_PROFILE", "").strip().lower()
    if not name:
        return "full" if pick_device().type == "cuda" else "cpu"
    if name not in PROFILES:
        raise ValueError(f"LAB_PROFILE must be one of {PROFILES}, got {name!r}")
    return name


def by_profile(*, quick: T, cpu: T, full: T, gpu_quick: T | object = _AS_FULL) -> T:
    """Pick the value for the active profile, e.g. `by_profile(quick=[8, 64], cpu=[...], full=[...])`.

    `gpu-quick` takes `full` unless `gpu_quick=` is given (None included)."""
    values = {"quick": quick, "cpu": cpu, "full": full, "gpu-quick": full if gpu_quick is _AS_FULL else gpu_quick}
    return values[current_profile()]
