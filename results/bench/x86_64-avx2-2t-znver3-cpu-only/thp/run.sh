#!/usr/bin/env bash
# THP A/B: the report's contiguous rows at 2^24 and 2^26, with torch's CPU allocator on 4 KiB pages
# (THP_MEM_ALLOC_ENABLE unset) and on 2 MiB pages (=1), alternating off, on, off, on.
set -u
C=/tmp/s66/thpclone
OUT=/tmp/s66/thp
mkdir -p $OUT
cd $C
for i in 1 2; do
  for thp in off on; do
    ( while true; do grep AnonHugePages /proc/meminfo | awk '{print $2}'; sleep 2; done ) > $OUT/anon-$thp-$i.txt &
    sampler=$!
    start=$(date +%s)
    if [ $thp = on ]; then export THP_MEM_ALLOC_ENABLE=1; else unset THP_MEM_ALLOC_ENABLE; fi
    PYTHONPATH=$C /work/main/.venv/bin/python -m tuner bench --report --layout contiguous --shape 2^24 --shape 2^26 \
      --op kl_div-log --op l1 --dtype float32 --dtype bfloat16 --out $OUT/thp-$thp-$i.json > $OUT/thp-$thp-$i.txt 2> $OUT/thp-$thp-$i.err
    echo "$thp $i rc=$? $(( $(date +%s) - start )) s" >> $OUT/runs.txt
    kill $sampler
  done
done
unset THP_MEM_ALLOC_ENABLE
