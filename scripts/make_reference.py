"""Run the lab's notebooks top to bottom and keep their measurement tables as reference results.

    python scripts/make_reference.py                  # every notebook, profile from the device (full on CUDA)
    python scripts/make_reference.py --profile quick --notebooks 00 --out /tmp/ref

Each notebook saves its key tables with `helpers.save_results`; this script runs them in a fresh
measurement folder, then copies the tables to `reference/<device>/` with a `run.json` that records the
device, driver, library versions, date and profile. The notebooks plot the reader's numbers beside these.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import helpers  # noqa: E402
from helpers.plumbing.profile import PROFILES  # noqa: E402
from helpers.plumbing.results import REFERENCE_DIR  # noqa: E402


def run_notebook(path: Path, timeout: int) -> float:
    """Execute one notebook in its own folder (outputs are not written back); return seconds taken."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    resources = {"metadata": {"path": str(path.parent)}}
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources=resources).execute()
    return time.perf_counter() - start


def copy_tables(results: Path, out: Path, run: dict) -> list[Path]:
    """Copy every device folder of saved tables (`results`/<device>/*.csv) to `out`/<device>/, each with run.json."""
    copied = []
    for folder in sorted(p for p in results.glob("*") if p.is_dir() and any(p.glob("*.csv"))):
        target = out / folder.name
        target.mkdir(parents=True, exist_ok=True)
        for table in sorted(folder.glob("*.csv")):
            copied.append(Path(shutil.copy2(table, target / table.name)))
        (target / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    return copied


def main(argv: list[str] | None = None) -> int:
    """Run the chosen notebooks and copy their tables into the reference folder."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=PROFILES, help="LAB_PROFILE (default: by device)")
    parser.add_argument("--notebooks", nargs="*", default=[], help="number prefixes to run, e.g. 00 02 (default all)")
    parser.add_argument("--out", type=Path, default=REFERENCE_DIR, help="reference folder (default reference/)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds allowed per cell")
    parser.add_argument("--notebook-dir", type=Path, default=ROOT / "notebooks", help="where the notebooks are")
    args = parser.parse_args(argv)

    every = sorted(args.notebook_dir.glob("*.ipynb"))
    paths = [p for p in every if p.name[:2] in args.notebooks] if args.notebooks else every
    if not paths:
        parser.error(f"--notebooks matched nothing among {[p.name[:2] for p in every]} in {args.notebook_dir}")

    if args.profile:
        os.environ["LAB_PROFILE"] = args.profile
    os.environ["LAB_CACHE_DIR"] = tempfile.mkdtemp(prefix="lab-reference-")  # the kernels inherit both
    seconds = {}
    for path in paths:
        print(f"running {path.name} ...", flush=True)
        seconds[path.name] = round(run_notebook(path, args.timeout), 1)
        print(f"  {seconds[path.name]} s", flush=True)

    run = {**helpers.run_info(), "seconds_per_notebook": seconds}
    tables = copy_tables(helpers.lab_dir() / "results", args.out, run)
    folders = sorted({str(t.parent) for t in tables})
    print(f"{len(tables)} tables and run.json written to {', '.join(folders) or args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
