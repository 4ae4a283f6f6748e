#!/bin/bash
# /tmp/rep: a clone of e1ea40b; /tmp/old: a clone checked out at ff0c89c; each tree on its own PYTHONPATH, one venv (torch 2.13.0)
for r in 1 2; do
  for w in rep old; do
    echo "## $w round $r"
    cd /tmp/$w && PYTHONPATH=/tmp/$w /work/main/.venv/bin/losstune bench --op mse --op l1 --op kl_div --op kl_div-log --dtype float16 --dtype bfloat16 --shape 2^22 --layout transposed --reduction none --reduction mean --rounds 5
  done
done
