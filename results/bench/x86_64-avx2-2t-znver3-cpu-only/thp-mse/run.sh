#!/usr/bin/env bash
# THP A/B for the rows nearest the vendor goal: mse float32 and float16, contiguous at 2^22, 2^24 and
# 2^26 and broadcast at 2^22 (mse float32 broadcast 0-d read 1.02x PyTorch in the full report at
# 2e79f7f), with torch's CPU allocator on 4 KiB pages (THP_MEM_ALLOC_ENABLE unset) and on 2 MiB
# pages (=1), alternating off, on, off, on. Run from a clone ($C), alone on the host.
set -u
C=${C:-/tmp/s67/thpclone}
OUT=${OUT:-/tmp/s67/thp-mse}
mkdir -p "$OUT"
cd "$C"
for i in 1 2; do
  for thp in off on; do
    ( while true; do grep AnonHugePages /proc/meminfo | awk '{print $2}'; sleep 2; done ) > "$OUT/anon-$thp-$i.txt" &
    sampler=$!
    start=$(date +%s)
    if [ $thp = on ]; then export THP_MEM_ALLOC_ENABLE=1; else unset THP_MEM_ALLOC_ENABLE; fi
    PYTHONPATH=$C /work/main/.venv/bin/python -m tuner bench --report --op mse --dtype float32 --dtype float16 \
      --layout contiguous --layout broadcast --shape 2^22 --shape 2^24 --shape 2^26 \
      --out "$OUT/thp-$thp-$i.json" > "$OUT/thp-$thp-$i.txt" 2> "$OUT/thp-$thp-$i.err"
    echo "$thp $i rc=$? $(( $(date +%s) - start )) s" >> "$OUT/runs.txt"
    kill $sampler
  done
done
unset THP_MEM_ALLOC_ENABLE
