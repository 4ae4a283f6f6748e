#!/bin/bash
# /tmp/rep: a clone of e1ea40b; /tmp/old: a clone checked out at ff0c89c
for r in 1 2 3; do
for w in old rep; do
  echo "## $w round $r"; cd /tmp/$w
  PYTHONPATH=/tmp/$w /work/main/.venv/bin/losstune bench --report --op mse --op kl_div --dtype bfloat16 --shape 2^22 --reduction mean 2>&1 | grep -E 'transposed'
done; done
