"""The seat each chapter needs: time and peak memory per chapter, in each profile, with 1 and with 2 CPUs.

    python scripts/seat_table.py                                  # quick and cpu, 1 and 2 CPUs: ~1.5 h on 2 cores
    python scripts/seat_table.py --profiles quick --cpus 1 2 --out docs/seat-table.md

Each (profile, CPUs) pair runs every chapter with `scripts/notebook_memory.py`, each in a fresh kernel, the CPUs
given as a cgroup CPU quota (as a JupyterHub seat gives them) where this machine allows one, else as the
process's CPU affinity. Run it on a quiet machine: the table is what a seat needs when nothing else slows it.
It writes a Markdown table (chapters as rows) and the raw CSV beside it, with the machine it was measured on.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import notebook_memory  # noqa: E402  (beside this script)

from helpers.plumbing.device import _cpu_model  # noqa: E402
from helpers.plumbing.working_set import reported_cache_bytes  # noqa: E402


def measure(profiles: list[str], cpus: list[int], notebooks: list[str]) -> pd.DataFrame:
    """One notebook_memory run per (profile, CPUs); their tables, stacked."""
    tables = []
    for profile in profiles:
        for n in cpus:
            csv = Path(os.environ.get("TMPDIR", "/tmp")) / f"seat-{profile}-{n}cpu.csv"
            os.environ["LAB_PROFILE"] = profile
            os.environ.pop("LAB_CACHE_DIR", None)  # a fresh cache per run: each calibrates as a new learner would
            print(f"== profile {profile}, {n} CPU(s)", flush=True)
            notebook_memory.main(["--cpus", str(n), "--checks-report-only", "--csv", str(csv),
                                  *(["--notebooks", *notebooks] if notebooks else [])])
            tables.append(pd.read_csv(csv).assign(profile=profile, cpus=n))
    return pd.concat(tables, ignore_index=True)


def markdown(raw: pd.DataFrame) -> str:
    """Chapters as rows; for each profile and CPU count, minutes and peak GiB (kernel and its children)."""
    raw = raw.assign(chapter=raw["notebook"].str.removesuffix(".ipynb"),
                     cell=raw["seconds"].map(lambda s: f"{s / 60:.1f} min") + ", "
                     + raw["peak kernel GiB"].map(lambda g: f"{g:.2f} GiB"))
    wide = raw.pivot_table(index="chapter", columns=["profile", "cpus"], values="cell", aggfunc="first")
    wide.columns = [f"{profile}, {cpus} CPU" for profile, cpus in wide.columns]
    totals = raw.groupby(["profile", "cpus"]).agg(seconds=("seconds", "sum"), peak=("peak kernel GiB", "max"))
    wide.loc["all chapters (time summed, peak the largest)"] = [
        f"{totals.loc[(p, c), 'seconds'] / 60:.1f} min, {totals.loc[(p, c), 'peak']:.2f} GiB"
        for p, c in (col.replace(" CPU", "").split(", ") for col in wide.columns)
        for c in [int(c)]]
    checks = raw.groupby(["profile", "cpus"])[["passed", "failed", "undecided"]].sum()
    l3 = reported_cache_bytes("cpu")
    head = (f"Measured {datetime.date.today().isoformat()} on {_cpu_model()}, {os.cpu_count()} cores"
            f"{f', {l3 / 2**20:.0f} MiB L3 reported' if l3 else ''}, nothing else running. Each cell: a chapter's "
            "time and the peak resident memory of its kernel and the processes it starts.\n\n")
    return (head + wide.to_markdown() + "\n\nSelf-checks in these runs (passed / failed / could not decide):\n\n"
            + checks.to_markdown() + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["quick", "cpu"], help="LAB_PROFILE values to measure")
    parser.add_argument("--cpus", nargs="+", type=int, default=[1, 2], help="CPU counts to give the seat")
    parser.add_argument("--notebooks", nargs="*", default=[], help="number prefixes, e.g. 00 03 (default all)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "seat-table.md", help="the Markdown table")
    args = parser.parse_args(argv)
    if any(n < 1 or n > (os.cpu_count() or 1) for n in args.cpus):
        parser.error(f"--cpus must be between 1 and {os.cpu_count()}, got {args.cpus}")
    raw = measure(args.profiles, args.cpus, args.notebooks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    raw.to_csv(args.out.with_suffix(".csv"), index=False)
    args.out.write_text(markdown(raw))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
