"""A class's results, merged: the instructor's side of `class_export`. `merge_results(folder)` reads a folder of
exported files into one long table, `class_summary(folder)` gives one row per seat; `scripts/merge_class_results.py`
prints, saves and plots them. A file from an older lab is read as far as it goes, with a message naming what it
lacked; a file that cannot be read is named in the messages, never dropped in silence."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from .class_export import PARTS, SCHEMA

ID_COLUMNS = ["seat", "chapter", "table"]  # what the merged table adds in front of each saved table's columns
# A seat that read nothing: what class_summary takes its columns from.
EMPTY_SEAT = {"seat": "", "file": "", "lacking": [], **{part: kind() for part, kind in PARTS.items()}}


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

