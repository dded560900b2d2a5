"""The reference script runs a notebook in the quick profile and writes its tables with run metadata."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_make_reference_quick_on_notebook_0(tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "make_reference.py"), "--profile", "quick",
                             "--notebooks", "00", "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (folder,) = tmp_path.iterdir()
    run = json.loads((folder / "run.json").read_text())
    assert run["profile"] == "quick" and run["torch"] and run["date"]
    assert "00-setup-and-your-hardware.ipynb" in run["seconds_per_notebook"]
    table = (folder / "00-setup-and-your-hardware--ceilings.csv").read_text()
    assert "bandwidth_GB_per_s" in table and "quick" in table
