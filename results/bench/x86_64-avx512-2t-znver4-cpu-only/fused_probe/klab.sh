#!/bin/bash
# kl_div's transposed rows at 2^22, b4f7a9d (the chip table's walks) against HEAD (the fused walk
# for the 0-d rows), each from its own clone, alternating processes.
for i in 1 2; do
  for tree in rep after; do
    echo "## $tree run $i $(cd /tmp/$tree && git log --oneline -1 | cut -c1-7)"
    (cd /tmp/$tree && PYTHONPATH=/tmp/$tree /work/main/.venv/bin/losstune bench --report --op kl_div --dtype float32 --dtype float16 --dtype bfloat16 --shape 2^22 --layout transposed --out /tmp/z4/klab-$tree-$i.json 2>/dev/null | grep -E 'transposed|goal')
  done
done
