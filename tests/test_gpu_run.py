"""The GPU run's driver runs each chapter in its own kernel, goes on past failures, keeps to its time budget,
and leaves a log, the executed notebooks and the saved tables (with run.json) where they can be brought back."""

import importlib.util
import json
from pathlib import Path

import nbformat
import pytest

import helpers

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("gpu_run", ROOT / "scripts" / "gpu_run.py")
gpu_run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_run)

# Where helpers.save_results puts a table (quicker than importing helpers in the kernel).
SAVES_A_TABLE = ["import os, pathlib\nfolder = pathlib.Path(os.environ['LAB_CACHE_DIR'], 'results', 'some-gpu')",
                 "folder.mkdir(parents=True)\n(folder / '01-tiny--sweep.csv').write_text('N,device\\n1,x\\n2,x\\n')"]


def write_notebook(folder: Path, name: str, cells: list[str]) -> None:
    """A notebook of code cells."""
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), folder / name)


@pytest.fixture
def chapters(tmp_path, monkeypatch):
    """Three tiny chapters (one saves a table, one has failing cells, one runs too long); the run's variables reset."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))  # gpu_run imports make_reference from its own folder
    monkeypatch.delenv("LAB_PROFILE", raising=False)
    monkeypatch.setenv("LAB_CACHE_DIR", "")
    folder = tmp_path / "notebooks"
    folder.mkdir()
    write_notebook(folder, "01-tiny.ipynb", SAVES_A_TABLE)
    write_notebook(folder, "02-fails.ipynb", ["x = 1", "1 / 0", "print('went on')", "undefined_name"])
    write_notebook(folder, "03-slow.ipynb", ["import time\ntime.sleep(120)"])
    write_notebook(folder, "not-a-chapter.ipynb", ["raise SystemExit"])
    return folder


def test_gpu_run_logs_each_chapter_and_brings_back_its_tables(chapters, tmp_path, capsys):
    out, reference = tmp_path / "out", tmp_path / "reference"
    code = gpu_run.main(["--out", str(out), "--notebook-dir", str(chapters), "--cell-timeout", "3",
                         "--reference-dir", str(reference)])
    assert code == 1  # not every chapter ran through
    rows = {r["notebook"]: r for r in json.loads((out / "summary.json").read_text())}
    assert list(rows) == ["01-tiny.ipynb", "02-fails.ipynb", "03-slow.ipynb"]
    assert rows["01-tiny.ipynb"]["status"] == "ok"
    assert rows["02-fails.ipynb"]["status"] == "failed" and rows["02-fails.ipynb"]["cell"] == 1
    assert rows["02-fails.ipynb"]["error"].startswith("ZeroDivisionError")
    assert [e["cell"] for e in rows["02-fails.ipynb"]["errors"]] == [1, 3]  # it went on past the first
    assert rows["03-slow.ipynb"]["status"] == "timeout" and rows["03-slow.ipynb"]["seconds"] < 20
    log = (out / "run.log").read_text()
    assert "profile gpu-quick" in log
    assert "at cell 1: ZeroDivisionError: division by zero [2 failing cells: 1, 3]" in log
    failed = nbformat.read(out / "notebooks" / "02-fails.ipynb", as_version=4)
    assert failed.cells[1].outputs[0].ename == "ZeroDivisionError" and failed.cells[2].outputs[0].text == "went on\n"
    for root in (out / "reference", reference):
        (folder,) = root.iterdir()
        assert sorted(p.name for p in folder.iterdir()) == ["01-tiny--sweep.csv", "run.json"]
        run = json.loads((folder / "run.json").read_text())
        assert run["profile"] == "gpu-quick" and run["status_per_notebook"]["03-slow.ipynb"] == "timeout"
    assert len(helpers.load_reference("01-tiny", "sweep", root=reference)) == 2
    assert "1 of 3 notebooks ran through; 1 tables copied" in capsys.readouterr().out


def test_gpu_run_starts_no_chapter_past_its_budget(chapters, tmp_path):
    out = tmp_path / "out"
    assert gpu_run.main(["--out", str(out), "--notebook-dir", str(chapters), "--budget", "5",
                         "--reference-dir", str(tmp_path / "reference")]) == 1
    rows = json.loads((out / "summary.json").read_text())
    assert [r["status"] for r in rows] == ["skipped"] * 3
    assert not (out / "notebooks").exists()


def pins(path: Path) -> dict[str, str]:
    """name -> version for each `name==version` line of a requirements file."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {name.lower().replace("_", "-"): version for name, _, version in
            (line.partition("==") for line in lines if "==" in line)}


def test_carried_wheels_add_to_the_gpu_machines_packages_and_follow_requirements():
    carried, required = pins(ROOT / "scripts" / "gpu_wheels.txt"), pins(ROOT / "requirements.txt")
    needed = {"nbclient", "ipykernel", "ipywidgets", "tqdm", "psutil", "fastapi", "uvicorn", "openai", "accelerate"}
    assert needed <= set(carried)
    assert not set(carried) & {"torch", "transformers", "numpy", "pandas", "matplotlib", "tokenizers", "safetensors"}
    assert {name: v for name, v in carried.items() if required.get(name, v) != v} == {}
