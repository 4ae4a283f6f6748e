#!/usr/bin/env bash
# The compiled-loop cache's cap on real entries: a copy of the home cache the README main job filled,
# every entry aged two days; first_calls.py loads what it needs (marking those used); a prune to just
# over their size keeps exactly them (the next fresh process loads all it needs), a prune under it
# leaves a fresh process compiling what went. Run from the repository root.
set -euo pipefail
LT=${LT:-.venv/bin/losstune}; PY=${PY:-.venv/bin/python}
FC=results/bench/x86_64-avx512-2t-znver4-cpu-only/jit_cache/first_calls.py
export LOSSTUNE_JIT_CACHE_DIR=$(mktemp -d)
cp -rp "${HOME}/.cache/losstune/jit/." "$LOSSTUNE_JIT_CACHE_DIR/"
find "$LOSSTUNE_JIT_CACHE_DIR" -name '*.nbc' -exec touch -d '2 days ago' {} +
echo "copied:            $($LT cache)"
echo "first_calls:       $($PY $FC)"
used=$(find "$LOSSTUNE_JIT_CACHE_DIR" -name '*.nbc' -newermt '1 hour ago' | wc -l)
bytes=$(find "$LOSSTUNE_JIT_CACHE_DIR" -name '*.nbc' -newermt '1 hour ago' -printf '%s\n' | awk '{s+=$1} END {print s}')
echo "marked used:       $used entries, $bytes bytes"
cap=$(( bytes / 1048576 + 1 ))
echo "prune to $cap MiB:   $(LOSSTUNE_JIT_CACHE_MAX_MB=$cap $LT cache --prune | tr '\n' ' ')"
echo "first_calls again: $($PY $FC)"
low=$(( cap / 2 ))
echo "prune to $low MiB:   $(LOSSTUNE_JIT_CACHE_MAX_MB=$low $LT cache --prune | tr '\n' ' ')"
echo "first_calls again: $($PY $FC)"
echo "after:             $($LT cache)"
rm -rf "$LOSSTUNE_JIT_CACHE_DIR"
