#!/bin/bash
# alternating processes: gates 11 (Zen 5's checked twin + raw flag) vs 00 (the Zen 4's own)
# /tmp/rep: a clone of e1ea40b
cd /tmp/rep
for r in 1 2 3; do
  for g in 11 00; do
    echo "## gates $g round $r"
    LOSSTUNE_CPU_CHECKED=${g:0:1} LOSSTUNE_CPU_RAW_FLAG=${g:1:1} PYTHONPATH=/tmp/rep /work/main/.venv/bin/losstune bench --op kl_div-log --dtype bfloat16 --dtype float16 --shape 2^22 --shape 2^24 --reduction none --reduction mean --rounds 5
  done
done
