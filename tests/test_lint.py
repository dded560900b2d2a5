"""Ruff lints the helpers, the tests and the notebooks (its settings are in pyproject.toml)."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_is_clean():
    """`ruff check helpers tests notebooks` finds nothing."""
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed: `pip install -r requirements.txt`")
    command = [sys.executable, "-m", "ruff", "check", "--no-cache", "helpers", "tests", "notebooks"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"ruff found problems:\n{result.stdout}{result.stderr}"
