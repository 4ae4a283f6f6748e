#!/usr/bin/env bash
# Run 3 on a lent GPU host (the device tool): resume run 2's studies (results/tuning/cuda-nvidia-h200.log)
# with the space's seeds, freeze, and re-time the roofline rows (2^24, 2^26) against the new table.
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
cp results/tuning/cuda-nvidia-h200.log $OUT/journal.log
SECONDS=0
timeout ${TUNE_S:-110} python3 -m tuner tune --backend cuda --op mse --op l1 --op kl_div --op kl_div-log --dtype bfloat16 --dtype float32 \
  --shape 2^24 --reduction none --reduction mean --trials ${TRIALS:-8} --min-time 0.01 --storage $OUT/journal.log --no-progress > $OUT/tune.txt 2>&1
echo "tune rc=$? in ${SECONDS}s"; tail -18 $OUT/tune.txt
python3 -m tuner freeze --backend cuda --storage $OUT/journal.log >> $OUT/tune.txt 2>&1; tail -1 $OUT/tune.txt
cp kernels/configs/cuda/*.json $OUT/ 2>/dev/null
SECONDS=0
timeout ${REPORT_S:-150} python3 -m tuner bench --report --backend cuda --op mse --op l1 --op kl_div --op kl_div-log \
  --dtype float32 --dtype float16 --dtype bfloat16 --shape 2^24 --shape 2^26 --min-time 0.002 --rounds 3 --goal-rounds 5 \
  --out $OUT/report-large.json > $OUT/report-large.log 2>&1
echo "report rc=$? in ${SECONDS}s"; tail -50 $OUT/report-large.txt
