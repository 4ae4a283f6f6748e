#!/bin/bash
for r in 1 2; do
for w in old rep; do
  echo "## $w round $r"; cd /tmp/$w
  PYTHONPATH=/tmp/$w /work/main/.venv/bin/losstune bench --report --op mse --op kl_div --dtype float16 --dtype bfloat16 --shape 2^22 --reduction none --reduction mean 2>&1 | grep -E 'transposed|contiguous'
done; done
