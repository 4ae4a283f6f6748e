#!/usr/bin/env bash
# Both processes alone, one after the other, every loop compiled (cache off), the same hash seed.
set -euo pipefail
cd "$(dirname "$0")"
root=$(git rev-parse --show-toplevel)
py="$root/.venv/bin/python"
export LOSSTUNE_JIT_CACHE=0 PYTHONHASHSEED=0 PYTHONPATH="$root"
LOSSTUNE_NUMBA_PATCHES=1 "$py" first_calls.py > on.json
LOSSTUNE_NUMBA_PATCHES=0 "$py" first_calls.py > off.json
"$py" compare.py on.json off.json | tee compare.txt
