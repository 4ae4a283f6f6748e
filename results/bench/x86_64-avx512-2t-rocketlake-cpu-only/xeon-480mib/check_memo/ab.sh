#!/bin/bash
# needs /tmp/before, a clone of the before commit (4152b86); the after side ran /work/main's working tree, whose
# _Bench.check was cbe5215's (its module docstring and README line were edited while the runs went on)
mkdir -p /tmp/exp
# alternating A/B of one study's wall time: before (/tmp/before, 4152b86) and after (/work/main's working tree)
for round in 1 2; do
  for side in after before; do
    root=/work/main; [ $side = before ] && root=/tmp/before
    for c in "mse float32" "kl_div-log float32" "kl_div-log bfloat16"; do
      set -- $c; rm -f /tmp/exp/j-$side.log
      cd $root
      /usr/bin/time -f "%e s wall %U user %S sys %M KB" env PYTHONPATH=$root /work/main/.venv/bin/losstune tune --op $1 --dtype $2 --shape 2^24 --reduction mean --storage /tmp/exp/j-$side.log --no-progress > /tmp/exp/run.txt 2>&1
      echo "round $round $side $1 $2: $(tail -2 /tmp/exp/run.txt | head -1 | cut -c1-200) | $(tail -1 /tmp/exp/run.txt)"
    done
  done
done
