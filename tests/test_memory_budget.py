"""The chapters fit the memory budget at any cache size: 4 GiB for a notebook, 4.5 GiB with the test runner.

Slow (it runs whole notebooks once per cache size), so it is skipped unless LAB_BUDGET_TEST=1 is set
(`-m "not budget"` also leaves it out, `-m budget` picks it alone):

    LAB_BUDGET_TEST=1 pytest tests/test_memory_budget.py
    LAB_BUDGET_TEST=1 LAB_BUDGET_NOTEBOOKS="00 03" LAB_BUDGET_CACHE_SIZES="8MiB,2GiB" pytest -m budget tests/

For each cache size it runs scripts/notebook_memory.py in the quick profile with LAB_TEST_CACHE_BYTES set, which
fakes the lab's measured effective last-level cache to that size, and checks every notebook ran and kept its
peak RSS (the kernel and its child processes) under the budget, with no error other than a self-check's.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("notebook_memory", ROOT / "scripts" / "notebook_memory.py")
notebook_memory = sys.modules["notebook_memory"] = importlib.util.module_from_spec(_spec)  # its dataclass looks it up
_spec.loader.exec_module(notebook_memory)
BUDGET_GIB = 4.5  # 4 GiB for the notebook, 0.5 GiB more for the test runner
NOTEBOOKS = os.environ.get("LAB_BUDGET_NOTEBOOKS", "00 01 03 07").split()
CACHE_SIZES = os.environ.get("LAB_BUDGET_CACHE_SIZES", "8MiB,1GiB,2GiB").split(",")
UNITS = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
# A faked cache makes the timing lessons' sizes wrong for this machine, so self-checks may fail here; what this
# test holds is that every cell runs and the memory stays in budget. Any other error or a dead kernel fails it.

def parse_bytes(size: str) -> int:
    """Bytes in a size such as '8MiB', '2GiB' or '4096'."""
    size = size.strip()
    for unit, scale in UNITS.items():
        if size.endswith(unit):
            return int(float(size.removesuffix(unit)) * scale)
    return int(size)


def test_parse_bytes():
    assert parse_bytes("8MiB") == 8 * 2**20
    assert parse_bytes(" 2GiB") == 2 * 2**30
    assert parse_bytes("4096") == 4096


def notebook_with_errors(*errors: tuple[str, str]) -> nbformat.NotebookNode:
    """A notebook with one code cell per (ename, evalue), each holding that error as its output."""
    cells = [nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output("error", ename=name, evalue=value)])
             for name, value in errors]
    return nbformat.v4.new_notebook(cells=cells)


def test_status_tells_self_checks_from_other_failures():
    """--checks-report-only and the budget test tolerate a notebook whose only errors are failed self-checks."""
    check = ("AssertionError", "Self-check failed: decode is memory-bound. Evidence: 3.1x")
    crash = ("RuntimeError", "shape mismatch")
    statuses = {
        "none": notebook_memory.cell_errors(notebook_with_errors()),
        "checks": notebook_memory.cell_errors(notebook_with_errors(check, check)),
        "mixed": notebook_memory.cell_errors(notebook_with_errors(check, crash)),
    }
    assert statuses["none"] == "ok"
    assert statuses["checks"].startswith("2 self-checks failed")
    assert notebook_memory.only_self_checks_failed(statuses["checks"])
    assert statuses["mixed"].startswith("2 cells failed")
    assert not notebook_memory.only_self_checks_failed(statuses["mixed"])
    assert not notebook_memory.only_self_checks_failed("kernel died: SIGKILL")


@pytest.mark.budget
@pytest.mark.skipif(os.environ.get("LAB_BUDGET_TEST") != "1", reason="slow: set LAB_BUDGET_TEST=1 to run it")
@pytest.mark.parametrize("cache_size", CACHE_SIZES)
def test_notebooks_fit_the_memory_budget(cache_size, tmp_path):
    csv = tmp_path / "memory.csv"
    env = {**os.environ, "LAB_PROFILE": "quick", "LAB_TEST_CACHE_BYTES": str(parse_bytes(cache_size)),
           "LAB_CACHE_DIR": str(tmp_path / "lab-cache")}  # fresh: nothing measured at another cache size
    command = [sys.executable, str(ROOT / "scripts" / "notebook_memory.py"), "--notebooks", *NOTEBOOKS,
               "--csv", str(csv)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    assert csv.exists(), f"no table written:\n{result.stdout}{result.stderr}"
    table = pd.read_csv(csv)
    assert sorted(name[:2] for name in table["notebook"]) == sorted(NOTEBOOKS), result.stdout
    problems = [f"{row['notebook']} at cache {cache_size}: {row['status']}, peak {row['peak kernel GiB']} GiB"
                for row in table.to_dict("records")
                if row["status"] != "ok" and not notebook_memory.only_self_checks_failed(row["status"])
                or row["peak kernel GiB"] >= BUDGET_GIB]
    assert not problems, f"over the {BUDGET_GIB} GiB budget or failed:\n" + "\n".join(problems)
