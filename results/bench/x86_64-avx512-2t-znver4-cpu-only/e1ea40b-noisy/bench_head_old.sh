#!/bin/bash
for r in 1 2; do
  for w in rep old; do
    echo "## $w round $r"
    cd /tmp/$w && PYTHONPATH=/tmp/$w /work/main/.venv/bin/losstune bench --op mse --op l1 --op kl_div --op kl_div-log --dtype float16 --dtype bfloat16 --shape 2^22 --layout transposed --reduction none --reduction mean --rounds 5
  done
done
