"""A class's results side by side: each learner exports one anonymous file, an instructor merges a folder of them.

nbgrader does not run on JupyterLab 4.3 and later, so a course gathers work as files. `export_results()` writes
what the chapters kept in lab_dir() (every `save_results` table, the cached ceilings and step-model calibrations,
the self-check log) and a description of the machine into one JSON file, with the home path, user name and host
name replaced by placeholders. `class_merge` reads a folder of such files for the instructor.

The file (schema 1):
    {"schema": 1, "seat": "3f9c2a1b", "exported": "2025-01-31",
     "machine": run_info() + {"cpu", "cores", "torch_threads", "python"},
     "ceilings": [ceilings-*.json, ...], "step_models": [step-model-*.json, ...],
     "checks": [one dict per line of checks.jsonl], "tables": {"<notebook>/<name>": [record, ...]}}
"""

from __future__ import annotations

import datetime
import getpass
import json
import math
import os
import platform
import re
import socket
import uuid
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .checks import read_check_log
from .device import _cpu_model
from .results import lab_dir, run_info, slug
from .seat import find_seat

SCHEMA = 1  # bump when the layout changes; merge_results reads every older file as far as it goes
PARTS = {"machine": dict, "ceilings": list, "step_models": list, "checks": list, "tables": dict}  # and their types


def saved_tables() -> dict[str, list[dict]]:
    """Every table save_results kept under lab_dir()/results/<device>/, as records keyed "<notebook>/<name>"."""
    tables = {}
    for path in sorted((lab_dir() / "results").glob("*/*--*.csv")):
        notebook, name = path.stem.split("--", 1)  # slug() never leaves "--" inside a name
        try:
            records = pd.read_csv(path).to_dict("records")
        except (OSError, ValueError) as error:  # pandas' empty-file and parser errors are ValueErrors
            warnings.warn(f"left out {path.name}, which could not be read: {error}", stacklevel=2)
            continue
        tables.setdefault(f"{notebook}/{name}", []).extend(records)  # saved on two devices: both kept
    return tables


def cached_json(pattern: str) -> list[dict]:
    """The JSON files in lab_dir() named like `pattern` (ceilings, step-model calibrations), each read."""
    found = []
    for path in sorted(lab_dir().glob(pattern)):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError) as error:
            warnings.warn(f"left out {path.name}, which could not be read: {error}", stacklevel=2)
    return found


def machine() -> dict:
    """What the numbers were measured on: run_info(), the CPU, cores, torch threads and the seat's limits."""
    return {**run_info(), "cpu": _cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(), **find_seat().describe()}


def identifying() -> dict[str, str]:
    """This machine's home path, host name and user name, each mapped to the placeholder written instead."""
    host = socket.gethostname()
    found = {str(p): "<home>" for p in (Path.home(), Path.home().resolve()) if len(str(p)) > 1}
    found |= {host: "<host>", host.split(".")[0]: "<host>"}
    try:
        found[getpass.getuser()] = "<user>"
    except (OSError, KeyError):  # no user name to be found, so none to leak
        pass
    return {text: placeholder for text, placeholder in found.items() if text}


def make_scrub() -> Callable[[str], str]:
    """A function that replaces the identifying strings in a text, in one pass (the longest first).

    Paths are replaced wherever they occur; a user or host name only as a whole word, since a short name
    ("vm", "lab") also occurs inside ordinary words."""
    found = identifying()
    whole_word = r"(?<![A-Za-z0-9]){}(?![A-Za-z0-9])"
    pattern = re.compile("|".join(re.escape(t) if found[t] == "<home>" else whole_word.format(re.escape(t))
                                  for t in sorted(found, key=len, reverse=True)))
    return lambda text: pattern.sub(lambda match: found[match.group(0)], text)


def plain(value, scrub: Callable[[str], str]):
    """`value` made safe to write: every string scrubbed, NaN and infinities as null, numpy scalars as Python's."""
    if isinstance(value, dict):
        return {scrub(str(k)): plain(v, scrub) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v, scrub) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float):
        return value
    return scrub(str(value))


def export_results(path: str | Path | None = None, seat: str | None = None) -> Path:
    """Write this seat's tables, ceilings, calibrations, self-checks and machine into one anonymous JSON file.

    `path` is a file, or a folder for `lab-results-<seat>.json` (default: the current folder); `seat` is a label
    to hand in under (default: a random id)."""
    scrub = make_scrub()
    seat = scrub(seat) if seat else uuid.uuid4().hex[:8]
    data = {"schema": SCHEMA, "seat": seat, "exported": datetime.date.today().isoformat(), "machine": machine(),
            "ceilings": cached_json("ceilings-*.json"), "step_models": cached_json("step-model-*.json"),
            "checks": read_check_log(), "tables": saved_tables()}
    path = Path.cwd() if path is None else Path(path)
    if path.is_dir():
        path = path / f"lab-results-{slug(seat) or 'seat'}.json"
    path.write_text(json.dumps(plain(data, scrub), indent=1, allow_nan=False) + "\n")
    return path


