#!/bin/bash
# The report's roofline rows (contiguous, 2^24 and 2^26, four ops x three dtypes x both gradients),
# run by run (bba5dea, /tmp/rep) against launch by launch (HEAD, /tmp/repL), alternating processes.
for pass in 1 2; do  # pass 2 was stopped (session time): only pass 1 is recorded
  for tree in rep repL; do
    cd /tmp/$tree
    PYTHONPATH=/tmp/$tree /work/main/.venv/bin/losstune bench --report --op mse --op l1 --op kl_div --op kl_div-log \
      --dtype float32 --dtype float16 --dtype bfloat16 --shape 2^24 --shape 2^26 --layout contiguous \
      --out /tmp/grain/roof_${tree}_${pass}.json > /tmp/grain/roof_${tree}_${pass}.txt 2>> /tmp/grain/roof.err
    echo "$tree $pass rc $? $(date +%T)" >> /tmp/grain/roof.log
  done
done
