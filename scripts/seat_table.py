"""The seat each chapter needs: time and peak memory per chapter, in each profile, with 1 and with 2 CPUs.

    python scripts/seat_table.py                                  # quick and cpu, 1 and 2 CPUs: ~1.5 h on 2 cores
    python scripts/seat_table.py --profiles quick --cpus 1 2 --out docs/seat-table.md
    python scripts/seat_table.py --from-csv docs/seat-table.csv        # the Markdown again, measuring nothing

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


def cell(seconds: float, peak_gib: float) -> str:
    return f"{seconds / 60:.1f} min, {peak_gib:.2f} GiB"


def markdown(raw: pd.DataFrame, machine: str) -> str:
    """Chapters as rows; for each profile and CPU count, minutes and peak GiB (kernel and its children)."""
    columns = list(dict.fromkeys(zip(raw["profile"], raw["cpus"], strict=True)))
    rows = {}
    for record in raw.to_dict("records"):
        chapter = record["notebook"].removesuffix(".ipynb")
        rows.setdefault(chapter, {})[f"{record['profile']}, {record['cpus']} CPU"] = (
            cell(record["seconds"], record["peak kernel GiB"]))
    for profile, cpus in columns:
        part = raw[(raw["profile"] == profile) & (raw["cpus"] == cpus)]
        rows.setdefault("all chapters (time summed, largest peak)", {})[f"{profile}, {cpus} CPU"] = (
            cell(part["seconds"].sum(), part["peak kernel GiB"].max()))
    table = pd.DataFrame.from_dict(rows, orient="index")
    checks = raw.groupby(["profile", "cpus"], sort=False)[["passed", "failed", "undecided"]].sum()
    return (f"Measured on {machine}, nothing else running. Each cell: a chapter's time and the peak resident "
            "memory of its kernel and the processes it starts, with the CPUs given as a cgroup CPU quota.\n\n"
            + table.to_markdown() + "\n\nSelf-checks in these runs (passed / failed / could not decide):\n\n"
            + checks.to_markdown() + "\n")


def this_machine() -> str:
    """The date, CPU model, cores and reported L3 that the table was measured with."""
    l3 = reported_cache_bytes("cpu")
    return (f"{datetime.date.today().isoformat()}, {_cpu_model()}, {os.cpu_count()} cores"
            + (f", {l3 / 2**20:.0f} MiB L3 reported" if l3 else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["quick", "cpu"], help="LAB_PROFILE values to measure")
    parser.add_argument("--cpus", nargs="+", type=int, default=[1, 2], help="CPU counts to give the seat")
    parser.add_argument("--notebooks", nargs="*", default=[], help="number prefixes, e.g. 00 03 (default all)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "seat-table.md", help="the Markdown table")
    parser.add_argument("--from-csv", type=Path, help="write the table from an earlier run's CSV, measuring nothing")
    parser.add_argument("--machine", help="the machine line for --from-csv (default: this machine, today)")
    args = parser.parse_args(argv)
    if any(n < 1 or n > (os.cpu_count() or 1) for n in args.cpus):
        parser.error(f"--cpus must be between 1 and {os.cpu_count()}, got {args.cpus}")
    raw = pd.read_csv(args.from_csv) if args.from_csv else measure(args.profiles, args.cpus, args.notebooks)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if not args.from_csv:
        raw.to_csv(args.out.with_suffix(".csv"), index=False)
    args.out.write_text(markdown(raw, args.machine or this_machine()))
    print(args.out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
