"""The package as pip installs it from git (Colab's setup cell): every module of `helpers` and the rank scripts
must be in the wheel, not only the top-level package."""

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_the_wheel_holds_every_helpers_file(tmp_path):
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed here: the wheel cannot be built without the network")
    source = tmp_path / "source"  # a copy: building in place would leave build/ in the checkout
    shutil.copytree(ROOT / "helpers", source / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    command = [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
               "-w", str(tmp_path / "wheel")]
    subprocess.run(command, check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    packed = set(zipfile.ZipFile(wheel).namelist())
    sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "helpers").rglob("*.py") if "__pycache__" not in p.parts}
    assert sources - packed == set()
