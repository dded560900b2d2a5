"""A class's results: each seat exports one anonymous file; a folder of them merges without losing anything."""

import getpass
import importlib.util
import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import helpers
from helpers.plumbing.results import slug

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "merge_class_results.py"
_spec = importlib.util.spec_from_file_location("merge_class_results", SCRIPT)
merge_script = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(merge_script)

ROOFLINE = pd.DataFrame({"n_tokens": [1, 8, 64], "predicted_s": [1.0, 2.0, 4.0], "measured_s": [2.0, 2.0, 2.0]})
STEPS = pd.DataFrame({"batch": [1, 2], "step_ms": [10.0, 20.0], "calibrated_ms": [11.0, 18.0]})
ERRORS = helpers.prediction_errors(STEPS, "step_ms", {"calibrated": "calibrated_ms"}, "batch")
CHECKS = [{"claim": "decode is memory-bound", "outcome": "pass", "contention": {"others_share": 0.1}},
          {"claim": "prefill is compute-bound", "outcome": "fail", "contention": {"others_share": 0.4}},
          {"claim": "the cache grows linearly", "outcome": "undecided"}]


def fill_lab(folder: Path, monkeypatch, bandwidth: float) -> None:
    """A lab folder as the chapters leave it: two saved tables, ceilings, a calibration, a self-check log."""
    monkeypatch.setenv("LAB_CACHE_DIR", str(folder))
    helpers.save_results(ROOFLINE, "01-compute-vs-memory-bound", "roofline", "cpu")
    helpers.save_results(ERRORS, "05-batching-and-serving", "decode-predicted-vs-measured", "cpu")
    device = helpers.device_name("cpu")
    ceilings = {"device": device, "bandwidth": bandwidth, "flops": {"float32": 2e12}, "default_dtype": "float32",
                "read_bandwidth": 1.5 * bandwidth}  # as measure_ceilings writes it (dataclasses.asdict)
    (folder / f"ceilings-{slug(device)}.json").write_text(json.dumps(ceilings))
    (folder / f"step-model-{slug(device)}-float32.json").write_text(json.dumps({"device": device, "dtype": "float32"}))
    (folder / "checks.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CHECKS))


@pytest.fixture
def class_folder(tmp_path, monkeypatch):
    """Two exported seats, a file from an older lab, one from a newer lab, a garbage file and a stray text file."""
    handed_in = tmp_path / "handed-in"
    handed_in.mkdir()
    fill_lab(tmp_path / "lab-a", monkeypatch, 20e9)
    helpers.export_results(handed_in)
    fill_lab(tmp_path / "lab-b", monkeypatch, 30e9)
    helpers.export_results(handed_in / "seat-b.json", seat="front-row")
    old = {"schema": 0, "seat": "old-seat", "machine": {"device": "some CPU", "cores": 4},
           "tables": {"01-compute-vs-memory-bound/roofline": [{"predicted_s": 3.0, "measured_s": 2.0}]}}
    (handed_in / "old.json").write_text(json.dumps(old))
    (handed_in / "future.json").write_text(json.dumps({"schema": 99, "seat": "x", "tables": {}}))
    (handed_in / "garbage.json").write_text("this is not { json")
    (handed_in / "notes.txt").write_text("handed in by mistake")
    return handed_in


def test_export_writes_one_file_with_every_part(tmp_path, monkeypatch):
    fill_lab(tmp_path / "lab", monkeypatch, 20e9)
    path = helpers.export_results(tmp_path)
    data = json.loads(path.read_text())
    assert path.name == f"lab-results-{data['seat']}.json" and re.fullmatch("[0-9a-f]{8}", data["seat"])
    assert data["schema"] == 1 and data["exported"]
    assert set(data["tables"]) == {"01-compute-vs-memory-bound/roofline",
                                   "05-batching-and-serving/decode-predicted-vs-measured"}
    assert [r["measured_s"] for r in data["tables"]["01-compute-vs-memory-bound/roofline"]] == [2.0, 2.0, 2.0]
    assert data["ceilings"][0]["bandwidth"] == 20e9 and data["step_models"][0]["dtype"] == "float32"
    assert [c["outcome"] for c in data["checks"]] == ["pass", "fail", "undecided"]
    assert {"device", "cpu", "cores", "torch_threads", "torch"} <= data["machine"].keys()


def test_export_names_no_host_user_or_home(tmp_path, monkeypatch):
    """The home path, user name and host name, put into a table on purpose, are not in the file."""
    home, user, host = str(Path.home()), getpass.getuser(), socket.gethostname()
    fill_lab(tmp_path / "lab", monkeypatch, 20e9)
    table = pd.DataFrame({"where": [f"{home}/notebooks on {host}"], f"by {user}": [1]})
    saved = helpers.save_results(table, f"01-{user}", "notes", "cpu")
    provenance = pd.read_csv(saved).assign(device=f"CPU of {user} on {host}")  # in the provenance columns too
    provenance.to_csv(saved, index=False)
    with (tmp_path / "lab" / "checks.jsonl").open("a") as log:
        log.write(json.dumps({"claim": f"ran in {home}", "outcome": "pass"}) + "\n")
    text = helpers.export_results(tmp_path / "out.json").read_text()
    assert home not in text and "<home>" in text and "<host>" in text and "<user>" in text
    for name in (user, host):  # a short name ("vm") also occurs inside ordinary words: look for the whole word
        assert not re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", text), name


def test_merge_names_every_problem_file_and_loses_no_row(class_folder):
    table, messages = helpers.merge_results(class_folder)
    told = "\n".join(messages)
    assert re.search(r"garbage\.json: skipped, not JSON", told)
    assert re.search(r"future\.json: skipped, made by a newer lab .*update", told)
    assert re.search(r"old\.json: schema 0 \(an older lab\), read without ceilings, step_models, checks", told)
    assert "notes.txt" in told and len(messages) == 4  # nothing said about the good files
    rows = table.groupby("seat").size().to_dict()
    seat_a = json.loads(next(class_folder.glob("lab-results-*.json")).read_text())["seat"]
    assert rows == {seat_a: len(ROOFLINE) + len(ERRORS), "front-row": len(ROOFLINE) + len(ERRORS), "old-seat": 1}
    roofline = table[(table.seat == "front-row") & (table.table == "roofline")]
    assert roofline["chapter"].unique().tolist() == ["01-compute-vs-memory-bound"]
    assert roofline["measured_s"].tolist() == ROOFLINE["measured_s"].tolist()


def test_class_summary_has_one_row_per_seat(class_folder):
    summary = helpers.class_summary(class_folder).set_index("seat")
    assert len(summary) == 3
    front = summary.loc["front-row"]
    assert front["copy_GB_per_s"] == pytest.approx(30) and front["matmul_TFLOP_per_s"] == pytest.approx(2)
    # |errors|: roofline 0.5, 0, 1; calibrated 0.1, 0.1 -> median 0.1
    assert front["predictions"] == 5 and front["median_abs_prediction_error"] == pytest.approx(0.1)
    assert (front["checks_pass"], front["checks_fail"], front["checks_undecided"]) == (1, 1, 1)
    assert front["worst_others_share"] == pytest.approx(0.4)
    old = summary.loc["old-seat"]
    assert pd.isna(old["copy_GB_per_s"]) and old["median_abs_prediction_error"] == pytest.approx(0.5)
    assert old["checks_pass"] == 0 and pd.isna(old["worst_others_share"])
    assert old["lacking"] == "ceilings, step_models, checks" and front["lacking"] == ""


def test_script_writes_tables_and_plot(class_folder, tmp_path):
    out = tmp_path / "merged"
    result = subprocess.run([sys.executable, str(SCRIPT), str(class_folder), "--out", str(out)],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "garbage.json" in result.stdout and "front-row" in result.stdout
    for name in ("class-results.csv", "class-summary.csv", "class-summary.png"):
        assert (out / name).stat().st_size > 0, name
    assert len(pd.read_csv(out / "class-summary.csv")) == 3


def test_script_exits_2_without_a_readable_file(tmp_path, capsys):
    (tmp_path / "garbage.json").write_text("[1, 2")
    assert merge_script.main([str(tmp_path), "--out", str(tmp_path / "merged")]) == 2
    assert "garbage.json" in capsys.readouterr().out
    assert not (tmp_path / "merged").exists()
