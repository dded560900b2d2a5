#!/usr/bin/env bash
# On a GPU machine with Python, torch, transformers, numpy, pandas and matplotlib but no network: install the
# carried wheels (from scripts/gpu_wheels.sh) outside that Python's own packages, then run every chapter in
# LAB_PROFILE=gpu-quick (unless set) within LAB_GPU_BUDGET_S seconds (480 unless set), all told.
#   bash scripts/gpu_run.sh                              # wheels/ -> $OUT, else gpu-run/, and reference/<gpu>/
#   bash scripts/gpu_run.sh --wheels /tmp/w --out /tmp/run --notebooks 05 06
# Every option but --wheels goes to scripts/gpu_run.py (--out, --notebooks, --cell-timeout, --reference-dir).
set -euo pipefail
cd "$(dirname "$0")/.."

wheels=wheels
args=()
while [ $# -gt 0 ]; do
    case $1 in
        --wheels) wheels=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
python=${PYTHON:-python3}
budget=${LAB_GPU_BUDGET_S:-480}
site=${LAB_GPU_SITE:-${TMPDIR:-/tmp}/lab-gpu-site}  # the carried packages, on PYTHONPATH: the machine's stay as they are

if ! cmp -s scripts/gpu_wheels.txt "$site/gpu_wheels.txt"; then
    echo "installing $(grep -c '==' scripts/gpu_wheels.txt) carried wheels from $wheels/ into $site ..."
    if "$python" -m pip --version >/dev/null 2>&1; then
        "$python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps --find-links "$wheels" \
            --upgrade --target "$site" -r scripts/gpu_wheels.txt
    else  # a Python without pip: a wheel is a zip of what goes into site-packages
        "$python" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' \
            "$site" "$wheels"/*.whl
    fi
    cp scripts/gpu_wheels.txt "$site/gpu_wheels.txt"
fi
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"  # the lab's helpers, then the carried packages
export LAB_PROFILE=${LAB_PROFILE:-gpu-quick} HF_HUB_OFFLINE=${HF_HUB_OFFLINE:-1} HF_HUB_DISABLE_UPDATE_CHECK=1
export TOKENIZERS_PARALLELISM=${TOKENIZERS_PARALLELISM:-false} JUPYTER_PLATFORM_DIRS=1
export JUPYTER_RUNTIME_DIR=${TMPDIR:-/tmp}/lab-jupyter-runtime IPYTHONDIR=${TMPDIR:-/tmp}/lab-ipython
"$python" -c "import nbclient, ipykernel, ipywidgets, tqdm, psutil" \
    || { echo "gpu_run.sh: a package the run needs does not import (above); see scripts/gpu_wheels.txt" >&2; exit 1; }
exec "$python" scripts/gpu_run.py --budget $((budget - SECONDS)) ${args[@]+"${args[@]}"}
