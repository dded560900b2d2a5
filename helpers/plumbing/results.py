"""Results: where measured ceilings and each notebook's tables are kept, and reference tables in git."""

from __future__ import annotations

import datetime
import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TypeVar

import pandas as pd
import torch
import transformers

from .contention import Contention, measure_quietly
from .device import as_device, device_name
from .profile import current_profile

# Reference tables live at the repository's root (reference/<device>/), where scripts/make_reference.py writes them.
REFERENCE_DIR = Path(__file__).resolve().parents[2] / "reference"


def lab_dir() -> Path:
    """Folder outside git for measurements: $LAB_CACHE_DIR, else ~/.cache/transformer-inference-lab."""
    root = os.environ.get("LAB_CACHE_DIR") or Path.home() / ".cache" / "transformer-inference-lab"
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def slug(text: str) -> str:
    """A file-name-safe version of `text` (letters, digits, '-')."""
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()


T = TypeVar("T")
_NOT_CACHED: dict[Path, object] = {}  # path -> a measurement taken while the machine was busy: this process only


def measured_once(path: Path, measure: Callable[[], T], what: str, load: Callable[[dict], T | None],
                  refresh: bool = False, tag: Callable[[T, Contention], T] | None = None) -> T:
    """A measurement kept in `path` (JSON) so that later chapters reuse it: read back with `load(data)` (None where
    the file is stale: measured again), else `measure()` under measure_quietly. It is written only when the machine
    was quiet, and otherwise kept for this process alone: one neighbour's burst must not bend every later
    chapter's predictions. `tag(result, contention)` may record the contention in the result (a dataclass)."""
    if path.exists() and not refresh:
        try:
            kept = load(json.loads(path.read_text()))
        except (TypeError, KeyError, json.JSONDecodeError):
            kept = None  # an older layout: measure again
        if kept is not None:
            return kept
    if path in _NOT_CACHED and not refresh:
        return _NOT_CACHED[path]
    result, found = measure_quietly(measure, what)
    if tag is not None:
        result = tag(result, found)
    if found.busy:
        _NOT_CACHED[path] = result
    else:
        path.write_text(json.dumps(asdict(result), indent=2))
    return result


def gpu_driver() -> str:
    """The NVIDIA driver version from nvidia-smi, or "" where it cannot be read."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def run_info(device: torch.device | str | None = None) -> dict[str, str]:
    """Device, versions, date and profile: the context every saved table carries."""
    device = as_device(device)
    return {
        "device": device_name(device),
        "device_type": device.type,
        "profile": current_profile(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "cuda": torch.version.cuda or "",
        "driver": gpu_driver() if device.type == "cuda" else "",
        "date": datetime.date.today().isoformat(),
    }


def save_results(table: pd.DataFrame, notebook: str, name: str, device: torch.device | str | None = None) -> Path:
    """Save a tidy table of measurements, tagged with run_info(), under lab_dir()/results/<device>/."""
    if table.empty:
        raise ValueError(f"table for {notebook}/{name} is empty: nothing to save")
    info = run_info(device)
    tagged = table.assign(**info)
    folder = lab_dir() / "results" / slug(info["device"])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{slug(notebook)}--{slug(name)}.csv"
    tagged.to_csv(path, index=False)
    return path


def load_reference(notebook: str, name: str, root: Path | None = None) -> pd.DataFrame:
    """Reference tables from other hardware under `root`/<device>/ (default REFERENCE_DIR; empty if none)."""
    root = REFERENCE_DIR if root is None else Path(root)
    frames = [pd.read_csv(p) for p in sorted(root.glob(f"*/{slug(notebook)}--{slug(name)}.csv"))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def prediction_errors(table: pd.DataFrame, measured: str, predictions: dict[str, str], key: str) -> pd.DataFrame:
    """Measured beside each prediction, and each one's error `predicted / measured - 1`, one row per `key`.

    `predictions` maps a label ("roofline", "calibrated") to the column holding that prediction."""
    missing = [c for c in (key, measured, *predictions.values()) if c not in table.columns]
    if missing:
        raise ValueError(f"table has no column {missing[0]!r}; columns: {list(table.columns)}")
    out = table[[key, measured]].copy()
    for label, column in predictions.items():
        out[label] = table[column]
        out[f"{label}_error"] = table[column] / table[measured] - 1
    return out.reset_index(drop=True)


def error_lean(errors: pd.Series, band: float = 0.1, most: float = 0.8, low_means: str = "a cost is missing",
               high_means: str = "it charges a cost the runs do not pay") -> str:
    """How a prediction's errors (`predicted / measured - 1`) lean, in words: how many are low and how many high
    by more than `band`, their median, and a verdict. Low past the band on at least `most` of them, or below
    zero on as many with the median past the band: `low_means`; high the same way: `high_means`; past the band
    both ways on as many: a wrong shape; a median past the band with mixed signs: some rows lean; else the
    misses look like noise."""
    if not 0 <= band < 1:
        raise ValueError(f"band must be in [0, 1), got {band!r}")
    if not 0.5 < most <= 1:
        raise ValueError(f"most must be in (0.5, 1], got {most!r}")
    errors = pd.Series(errors, dtype=float).dropna()
    if errors.empty:
        raise ValueError("errors holds no value")
    low, high = int((errors < -band).sum()), int((errors > band).sum())
    n, median = len(errors), errors.median()
    leans_low = low >= most * n or ((errors < 0).sum() >= most * n and median < -band)
    leans_high = high >= most * n or ((errors > 0).sum() >= most * n and median > band)
    verdict = (f"low almost everywhere: {low_means}" if leans_low else
               f"high almost everywhere: {high_means}" if leans_high else
               f"past {band:.0%} both ways on most rows: the shape is wrong, not one term missing"
               if low and high and low + high >= most * n else
               f"mixed signs, the median past {band:.0%}: some rows lean, read them one by one"
               if abs(median) > band
               else f"no lean past {band:.0%}: its misses look like noise, not a missing term")
    return (f"{low} low, {high} high of {n} by over {band:.0%}, median {median:+.0%} "
            f"({verdict})")
