#!/usr/bin/env bash
# Download the wheels that scripts/gpu_run.sh installs on a GPU machine without network (scripts/gpu_wheels.txt),
# for Linux x86_64 and one Python version, with no dependencies beyond that list. Run it where pip reaches PyPI.
#   bash scripts/gpu_wheels.sh                          # Python 3.12, into wheels/
#   bash scripts/gpu_wheels.sh --python 3.11 /tmp/wheels-py311
# Prints each wheel with its size and the total; fails if the total is over 64 MiB (what a run may carry).
set -euo pipefail
cd "$(dirname "$0")/.."

python_version=3.12
if [ "${1:-}" = "--python" ]; then
    python_version=$2
    shift 2
fi
dest=${1:-wheels}
limit_mib=64

${PYTHON:-python3} -m pip download --quiet --no-deps --only-binary=:all: --dest "$dest" \
    --python-version "$python_version" --implementation cp --abi "cp${python_version/./}" \
    --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -r scripts/gpu_wheels.txt

# The listed wheels only (an older download left in the folder is neither counted nor installed).
${PYTHON:-python3} - "$dest" "$limit_mib" <<'PY'
import re, sys
from pathlib import Path

dest, limit_mib = Path(sys.argv[1]), float(sys.argv[2])
pins = [line.split("#")[0].strip() for line in Path("scripts/gpu_wheels.txt").read_text().splitlines()]
total = 0
for pin in filter(None, pins):
    name, version = pin.split("==")
    stem = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-"
    (wheel,) = [w for w in dest.glob("*.whl") if w.name.lower().startswith(stem)]
    total += wheel.stat().st_size
    print(f"{wheel.stat().st_size / 2**20:8.2f} MiB  {wheel.name}")
print(f"{total / 2**20:8.2f} MiB  in all, {len(list(filter(None, pins)))} wheels in {dest}/ (limit {limit_mib:.0f} MiB)")
sys.exit(f"over {limit_mib:.0f} MiB: carry fewer wheels" if total > limit_mib * 2**20 else 0)
PY
