"""A notebook whose kernel dies fails in seconds under nbval, naming the cell and the signal that killed it."""

import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = "tests.nbval_dead_kernel"

CELLS = [
    "x = 1",
    "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)  # as the out-of-memory killer would",
    "print('never runs')",
]


def test_the_root_conftest_loads_the_plugin(request: pytest.FixtureRequest):
    assert request.config.pluginmanager.has_plugin(PLUGIN)


def test_a_killed_kernel_fails_its_cell_at_once_and_skips_the_rest(tmp_path):
    notebook = tmp_path / "killed.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS]), notebook)
    # The notebook lies outside the repo, so no conftest applies: load the plugin by name (the repo root is
    # the working directory, so `tests` imports) and give the options pyproject's addopts give the real runs.
    command = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env", "--nbval-cell-timeout=600",
               "-p", "no:cacheprovider", "-p", PLUGIN, "--rootdir", str(tmp_path), "-rs", str(notebook)]
    start = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    seconds = time.monotonic() - start
    output = result.stdout + result.stderr
    assert seconds < 60, f"took {seconds:.0f} s:\n{output}"
    assert result.returncode == 1, output
    assert "1 failed, 1 passed, 1 skipped" in output, output
    assert "killed by SIGKILL (the out-of-memory killer, most likely: memory)" in output, output
    assert "while running cell 1 (`import os, signal`) of killed.ipynb" in output, output
    assert "not run: kernel killed by SIGKILL" in output, output
