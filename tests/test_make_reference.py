"""The reference script runs notebooks and copies the tables they save, with run metadata, to a folder."""

import importlib.util
import json
import os
from pathlib import Path

import nbformat
import pandas as pd
import pytest

import helpers

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("make_reference", ROOT / "scripts" / "make_reference.py")
make_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_reference)

# A notebook that saves one table the way the chapters do; far quicker to run than a chapter.
CELLS = [
    f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport pandas as pd\nimport helpers\nlab = helpers.setup()",
    "table = pd.DataFrame({'N': [1, 2], 'median_s': [0.5, 1.0]})\n"
    "helpers.save_results(table, '07-tiny', 'sweep', lab.device)",
]


@pytest.fixture(autouse=True)
def restore_environment(monkeypatch):
    """The script sets LAB_PROFILE and LAB_CACHE_DIR for the kernels it starts; undo that after each test."""
    for name in ("LAB_PROFILE", "LAB_CACHE_DIR"):
        monkeypatch.setenv(name, os.environ.get(name, ""))


def test_make_reference_runs_notebooks_and_keeps_their_tables(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    nbformat.write(nb, notebooks / "07-tiny.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), notebooks / "08-not-chosen.ipynb")
    out = tmp_path / "reference"
    assert make_reference.main(["--profile", "quick", "--notebook-dir", str(notebooks), "--notebooks", "07",
                                "--out", str(out)]) == 0
    assert "1 tables and run.json written" in capsys.readouterr().out
    (folder,) = out.iterdir()
    run = json.loads((folder / "run.json").read_text())
    assert run["profile"] == "quick" and run["torch"] and run["date"]
    assert list(run["seconds_per_notebook"]) == ["07-tiny.ipynb"]
    (table,) = folder.glob("*.csv")
    assert table.name == "07-tiny--sweep.csv"
    text = table.read_text()
    assert "median_s" in text and "quick" in text


def test_make_reference_says_when_no_notebook_matches(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        make_reference.main(["--notebook-dir", str(tmp_path), "--notebooks", "42", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and "--notebooks matched nothing" in capsys.readouterr().err


def test_reference_tables_round_trip_from_the_script_to_load_reference(tmp_path):
    """A table copied by the script's own function is the table `helpers.load_reference` reads back."""
    results = tmp_path / "results" / "some-gpu"
    results.mkdir(parents=True)
    table = pd.DataFrame({"prompt_len": [16, 64], "ttft_s": [0.01, 0.02], "device": "Some GPU", "profile": "full"})
    table.to_csv(results / "02-prefill-vs-decode--ttft.csv", index=False)
    reference = tmp_path / "reference"
    copied = make_reference.copy_tables(tmp_path / "results", reference, {"device": "Some GPU", "profile": "full"})
    assert copied == [reference / "some-gpu" / "02-prefill-vs-decode--ttft.csv"]
    assert json.loads((reference / "some-gpu" / "run.json").read_text())["device"] == "Some GPU"
    pd.testing.assert_frame_equal(helpers.load_reference("02-prefill-vs-decode", "ttft", root=reference), table)


def test_script_and_helpers_share_the_reference_folder_at_the_repository_root():
    assert helpers.plumbing.results.REFERENCE_DIR == ROOT / "reference"
    assert make_reference.REFERENCE_DIR is helpers.plumbing.results.REFERENCE_DIR
