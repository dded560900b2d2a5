"""A class's results side by side: each learner exports one anonymous file, an instructor merges a folder of them.

nbgrader does not run on JupyterLab 4.3 and later, so a course gathers work as files. `export_results()` writes
what the chapters kept in lab_dir() (every `save_results` table, the cached ceilings and step-model calibrations,
the self-check log) and a description of the machine into one JSON file, with the home path, user name and host
name replaced by placeholders. `merge_results(folder)` and `class_summary(folder)` read a folder of such files;
`scripts/merge_class_results.py` prints, saves and plots them.

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
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from .device import _cpu_model
from .results import lab_dir, run_info, slug

SCHEMA = 1  # bump when the layout changes; merge_results reads every older file as far as it goes
PARTS = {"machine": dict, "ceilings": list, "step_models": list, "checks": list, "tables": dict}  # and their types
ID_COLUMNS = ["seat", "chapter", "table"]  # what the merged table adds in front of each saved table's columns
# A seat that read nothing: what class_summary takes its columns from.
EMPTY_SEAT = {"seat": "", "file": "", "lacking": [], **{part: kind() for part, kind in PARTS.items()}}


# ---- The learner's side: one file per seat.

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


def check_log() -> list[dict]:
    """The self-checks run so far, one dict per line of lab_dir()/checks.jsonl (empty if there is none)."""
    path = lab_dir() / "checks.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    checks = []
    for number, line in enumerate(lines, start=1):
        try:
            checks.append(json.loads(line))
        except ValueError:
            warnings.warn(f"left out line {number} of checks.jsonl, which is not JSON", stacklevel=2)
    return [c for c in checks if isinstance(c, dict)]


def machine() -> dict:
    """What the numbers were measured on: run_info() and the CPU, cores and torch threads (nothing personal)."""
    return {**run_info(), "cpu": _cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "python": platform.python_version()}


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
            "checks": check_log(), "tables": saved_tables()}
    path = Path.cwd() if path is None else Path(path)
    if path.is_dir():
        path = path / f"lab-results-{slug(seat) or 'seat'}.json"
    path.write_text(json.dumps(plain(data, scrub), indent=1, allow_nan=False) + "\n")
    return path


# ---- The instructor's side: a folder of files, merged.

def read_seat(path: Path) -> tuple[dict | None, list[str]]:
    """One exported file with every part present (empty where it lacked one), or None; and what to say about it."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return None, [f"{path.name}: skipped, not JSON ({error})"]
    if not isinstance(data, dict) or not {"schema", "tables"} & data.keys():
        return None, [f"{path.name}: skipped, JSON but not a lab results file (no 'schema' or 'tables')"]
    schema = data.get("schema", 0)  # files from before the schema was written are schema 0
    if not isinstance(schema, int) or isinstance(schema, bool):
        return None, [f"{path.name}: skipped, its schema {schema!r} is not a version number"]
    if schema > SCHEMA:
        return None, [f"{path.name}: skipped, made by a newer lab (schema {schema}; this one reads up to "
                      f"{SCHEMA}): update the lab (git pull) and merge again"]
    seat, told = seat_parts(data, path.name)
    seat["seat"], seat["file"] = str(data.get("seat") or path.stem), path.name
    if seat["lacking"]:
        told.insert(0, f"{path.name}: schema {schema}{' (an older lab)' if schema < SCHEMA else ''}, read without "
                       f"{', '.join(seat['lacking'])}")
    return seat, told


def seat_parts(data: dict, name: str) -> tuple[dict, list[str]]:
    """The parts of a file that can be read (the rest empty, listed under "lacking"), and what was left out."""
    lacking = [part for part, kind in PARTS.items() if not isinstance(data.get(part), kind)]
    seat = {part: kind() if part in lacking else data[part] for part, kind in PARTS.items()} | {"lacking": lacking}
    told = []
    bad = [key for key, records in seat["tables"].items()
           if not (isinstance(records, list) and all(isinstance(r, dict) for r in records))]
    if bad:
        told.append(f"{name}: left out table(s) {', '.join(bad)}: not a list of rows")
    seat["tables"] = {key: records for key, records in seat["tables"].items() if key not in bad}
    checks = [c for c in seat["checks"] if isinstance(c, dict)]
    if len(checks) < len(seat["checks"]):
        told.append(f"{name}: left out {len(seat['checks']) - len(checks)} self-check(s) that are not records")
    seat["checks"] = checks
    return seat, told


def read_seats(folder: str | Path) -> tuple[list[dict], list[str]]:
    """Every readable exported file in `folder`, and a message for each file skipped or read in part."""
    folder = Path(folder)
    if not folder.is_dir():
        return [], [f"{folder}: no such folder"]
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    seats, messages = [], [f"{p.name}: not read, not a .json file" for p in files if p.suffix != ".json"]
    for path in (p for p in files if p.suffix == ".json"):
        seat, told = read_seat(path)
        messages += told
        if seat is None:
            continue
        if seat["seat"] in {s["seat"] for s in seats}:  # two files under one seat: both kept, apart
            messages.append(f"{path.name}: seat {seat['seat']!r} was already read from another file; "
                            f"kept as {seat['seat']} ({path.name})")
            seat["seat"] = f"{seat['seat']} ({path.name})"
        seats.append(seat)
    return seats, messages


def seat_tables(seat: dict) -> list[pd.DataFrame]:
    """Each table a seat saved, with its seat, chapter and table name in front."""
    frames = []
    for key, records in seat["tables"].items():
        chapter, _, name = key.rpartition("/")
        frame = pd.DataFrame.from_records(records)
        frame = frame.rename(columns={c: f"{c} (saved)" for c in ID_COLUMNS if c in frame.columns})
        for column, value in reversed(list(zip(ID_COLUMNS, (seat["seat"], chapter, name), strict=True))):
            frame.insert(0, column, value)
        frames.append(frame)
    return frames


def merge_results(folder: str | Path) -> tuple[pd.DataFrame, list[str]]:
    """Every seat's saved tables in one long table (seat, chapter, table, columns...), and what was skipped."""
    seats, messages = read_seats(folder)
    frames = [frame for seat in seats for frame in seat_tables(seat)]
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=ID_COLUMNS)
    return table, messages


def prediction_error_values(table: pd.DataFrame) -> pd.Series:
    """Every `predicted / measured - 1` in a table: `predicted_X` against `measured_X`, and prediction_errors'
    `<label>_error` columns (those beside a `<label>` column); non-finite ones left out."""
    numeric = lambda column: pd.to_numeric(table[column], errors="coerce")
    errors = [numeric(c) / numeric("measured" + c.removeprefix("predicted")) - 1 for c in table.columns
              if c.startswith("predicted") and "measured" + c.removeprefix("predicted") in table.columns]
    errors += [numeric(f"{c}_error") for c in table.columns if f"{c}_error" in table.columns]
    values = pd.concat(errors, ignore_index=True) if errors else pd.Series(dtype=float)
    return values[np.isfinite(values)]


def number(value) -> float:
    """`value` as a float, or NaN where it is not a number (an older or hand-edited file)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else math.nan


def seat_ceilings(seat: dict) -> tuple[float, float]:
    """Copy bandwidth (GB/s) and matmul peak (TFLOP/s) from the seat's ceilings for its own device (NaN if none)."""
    found = [c for c in seat["ceilings"] if isinstance(c, dict)]
    own = [c for c in found if c.get("device") == seat["machine"].get("device")] or found
    if not own:
        return math.nan, math.nan
    flops = own[0].get("flops") if isinstance(own[0].get("flops"), dict) else {}
    return number(own[0].get("bandwidth")) / 1e9, number(flops.get(own[0].get("default_dtype"))) / 1e12


def seat_row(seat: dict) -> dict:
    """One seat's line in the class summary."""
    copy_gb_per_s, matmul_tflop_per_s = seat_ceilings(seat)
    errors = [prediction_error_values(pd.DataFrame.from_records(r)) for r in seat["tables"].values()]
    errors = pd.concat(errors, ignore_index=True).abs() if errors else pd.Series(dtype=float)
    outcomes = Counter(str(check.get("outcome")) for check in seat["checks"])
    contention = [c["contention"] for c in seat["checks"] if isinstance(c.get("contention"), dict)]
    shares = [s for s in (number(c.get("others_share")) for c in contention) if not math.isnan(s)]
    return {"seat": seat["seat"], "device": seat["machine"].get("device"), "cores": seat["machine"].get("cores"),
            "torch_threads": seat["machine"].get("torch_threads"), "copy_GB_per_s": copy_gb_per_s,
            "matmul_TFLOP_per_s": matmul_tflop_per_s, "tables": len(seat["tables"]), "predictions": len(errors),
            "median_abs_prediction_error": errors.median() if len(errors) else math.nan,
            "checks_pass": outcomes["pass"], "checks_fail": outcomes["fail"],
            "checks_undecided": outcomes["undecided"], "worst_others_share": max(shares, default=math.nan),
            "lacking": ", ".join(seat["lacking"]), "file": seat["file"]}


def class_summary(folder: str | Path) -> pd.DataFrame:
    """One row per seat: device, cores, ceilings, median |predicted / measured - 1|, self-checks, worst contention."""
    seats, _ = read_seats(folder)
    return pd.DataFrame([seat_row(seat) for seat in seats], columns=list(seat_row(EMPTY_SEAT)))

