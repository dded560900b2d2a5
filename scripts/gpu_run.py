"""Run every chapter in one go on a GPU machine and keep what they measured (scripts/gpu_run.sh calls this).

    python scripts/gpu_run.py --out gpu-run --budget 480            # all chapters, LAB_PROFILE or gpu-quick
    python scripts/gpu_run.py --notebooks 05 06 --cell-timeout 120   # some chapters again

Each notebook runs in a fresh kernel, on past a failing cell (so one run shows every check that fails), and
is saved with its outputs to <out>/notebooks/. No notebook starts past the budget (the ones left are logged as
skipped), and each gets at most an equal share of the time left, so one slow chapter cannot use up the
others' time: a cell still running at its notebook's limit is interrupted. <out>/run.log and
<out>/summary.json give each notebook's status, seconds and failing cells. The tables the notebooks saved
(measurements kept in <out>/cache/) are copied with make_reference's run.json into <out>/reference/<device>/
and reference/<device>/.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, DeadKernelError

ROOT = Path(__file__).resolve().parent.parent
TIMED_OUT = "CellTimeoutError"  # the error name a cell stopped at its time limit reports
RESERVE_S = 20  # kept back from the budget for the last kernel to shut down and the tables to be copied
OPTIONAL = {"chapter 6's server cells (transformers serve)": ("transformers.cli.transformers", "fastapi", "uvicorn",
                                                              "openai", "accelerate"),
            "chapter 7's torchao rows": ("torchao",)}


def chapters(folder: Path, prefixes: list[str]) -> list[Path]:
    """The chapter notebooks (NN-name.ipynb) in order, or those whose number is in `prefixes`."""
    every = sorted(folder.glob("[0-9][0-9]-*.ipynb"))
    return [p for p in every if not prefixes or p.name[:2] in prefixes]


def import_problems() -> list[str]:
    """What some chapters import but this machine cannot, and which cells that stops."""
    for noisy in ("torchao", "torch.utils._pytree"):  # as helpers does: kernels for other GPUs, deprecation notes
        logging.getLogger(noisy).setLevel(logging.ERROR)
    problems = []
    for stops, names in OPTIONAL.items():
        for name in names:
            try:
                importlib.import_module(name)
            except Exception as error:
                problems.append(f"{name} does not import ({type(error).__name__}: {error}): {stops} will fail")
                break
    return problems


def error_line(error: Exception) -> str:
    """One line that says why a notebook stopped."""
    if isinstance(error, CellExecutionError):
        return f"{error.ename}: {error.evalue}".strip().splitlines()[0]
    return f"{type(error).__name__}: {error}".strip().splitlines()[0]


def execute_cells(client: NotebookClient, deadline: float, cell_timeout: int) -> list[tuple[int, Exception]]:
    """Run the notebook's cells in order, on past failing ones, until one runs out of time or the kernel dies."""
    errors = []
    for index, cell in enumerate(client.nb.cells):
        left = deadline - time.monotonic()
        client.timeout = max(1, int(min(cell_timeout, left)))
        which = "a cell's limit" if cell_timeout < left else "the notebook's share of the budget"
        client.error_on_timeout = {"ename": TIMED_OUT, "evalue": f"still running after {client.timeout} s ({which})",
                                   "traceback": []}
        try:
            client.execute_cell(cell, index)
        except CellExecutionError as error:
            errors.append((index, error))
            if error.ename == TIMED_OUT:
                break
        except DeadKernelError as error:
            errors.append((index, error))
            break
    return errors


def run_chapter(path: Path, saved: Path, cell_timeout: int, limit_s: float) -> dict:
    """Execute one notebook within `limit_s`, save it with its outputs, and return its log row."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", interrupt_on_timeout=True,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.monotonic()
    try:
        with client.setup_kernel():
            errors = execute_cells(client, start + limit_s, cell_timeout)
    except Exception as error:  # a kernel that would not start, say: log it and go on to the next notebook
        errors = [(None, error)]
    row = {"notebook": path.name, "status": "ok", "seconds": round(time.monotonic() - start, 1), "cell": None,
           "error": "", "errors": [{"cell": i, "error": error_line(e)} for i, e in errors]}
    if errors:
        (first_cell, first), (_, last) = errors[0], errors[-1]
        timed_out = isinstance(last, CellExecutionError) and last.ename == TIMED_OUT
        status = "timeout" if timed_out else "kernel died" if isinstance(last, DeadKernelError) else "failed"
        row |= {"status": status, "cell": first_cell, "error": error_line(first), "traceback": str(first)[-4000:]}
    saved.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, saved / path.name)
    return row


def log_line(row: dict) -> str:
    """A notebook's line in run.log: name, status, seconds, and where and why it failed."""
    line = f"{row['notebook']:<40} {row['status']:<12} {row['seconds']:>7.1f} s"
    if row.get("errors"):
        line += f" at cell {row['cell']}: {row['error']}"
    if len(row.get("errors", [])) > 1:
        line += f" [{len(row['errors'])} failing cells: {', '.join(str(e['cell']) for e in row['errors'])}]"
    return line


def copy_reference_tables(out: Path, reference_dir: Path | None, rows: list[dict]) -> list[Path]:
    """The tables the run saved, with make_reference's run.json, into <out>/reference/ and reference/ (or elsewhere)."""
    # Imported here, not at the top: only the tables need helpers, and every notebook's log line is written by now.
    from make_reference import copy_tables

    import helpers

    run = {**helpers.run_info(), "seconds_per_notebook": {r["notebook"]: r["seconds"] for r in rows},
           "status_per_notebook": {r["notebook"]: r["status"] for r in rows}}
    results = helpers.lab_dir() / "results"
    copy_tables(results, reference_dir or helpers.plumbing.results.REFERENCE_DIR, run)
    return copy_tables(results, out / "reference", run)


def main(argv: list[str] | None = None) -> int:
    """Run the chapters within the budget, log each one, save them executed, and copy their tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu-run"),
                        help="output folder (default $OUT, else gpu-run/)")
    parser.add_argument("--budget", type=float, default=480, help="seconds for the whole run (default 480)")
    parser.add_argument("--cell-timeout", type=int, default=300, help="seconds allowed per cell (default 300)")
    parser.add_argument("--notebooks", nargs="*", default=[], help="number prefixes to run, e.g. 00 02 (default all)")
    parser.add_argument("--notebook-dir", type=Path, default=ROOT / "notebooks", help="where the notebooks are")
    parser.add_argument("--reference-dir", type=Path, help="where reference/<device>/ goes (default reference/)")
    args = parser.parse_args(argv)
    start = time.monotonic()
    deadline = start + args.budget - RESERVE_S

    paths = chapters(args.notebook_dir, args.notebooks)
    if not paths:
        parser.error(f"no chapter notebooks matched {args.notebooks or 'NN-*.ipynb'} in {args.notebook_dir}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("LAB_PROFILE", "gpu-quick")
    os.environ["LAB_CACHE_DIR"] = str(out / "cache")  # the kernels inherit it: the saved tables land there

    rows = []
    with open(out / "run.log", "w") as log:
        log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} profile {os.environ['LAB_PROFILE']}, budget "
                  f"{args.budget:.0f} s, cell timeout {args.cell_timeout} s, python {sys.version.split()[0]}\n")
        for problem in import_problems():
            print(problem, flush=True)
            log.write(problem + "\n")
        for i, path in enumerate(paths):
            left = deadline - time.monotonic()
            if left < 1:
                row = {"notebook": path.name, "status": "skipped", "seconds": 0.0, "cell": None,
                       "error": "the run's time budget was spent", "errors": []}
            else:
                share = left / (len(paths) - i)
                print(f"running {path.name} (at most {share:.0f} s) ...", flush=True)
                row = run_chapter(path, out / "notebooks", args.cell_timeout, share)
            rows.append(row)
            print(log_line(row), flush=True)
            log.write(log_line(row) + "\n")
            log.flush()
        tables = copy_reference_tables(out, args.reference_dir, rows)
        done = sum(r["status"] == "ok" for r in rows)
        summary = f"{done} of {len(rows)} notebooks ran through; {len(tables)} tables copied; " \
                  f"{time.monotonic() - start:.0f} s in all"
        log.write(summary + "\n")
    (out / "summary.json").write_text(json.dumps(rows, indent=2) + "\n")
    print(summary, flush=True)
    return 0 if done == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
