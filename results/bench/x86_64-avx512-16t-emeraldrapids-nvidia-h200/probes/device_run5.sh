#!/usr/bin/env bash
# Run 5 on a lent GPU host (the device tool): the 24 studies at 2^26 (every op, float32, float16
# and bfloat16, full and 0-d gradient) with launch-free timing, resumed from run 4's journal,
# freeze, then the 2^24 and 2^26 rows re-timed against that table; outputs in $OUT.
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
cp results/tuning/cuda-nvidia-h200.log $OUT/journal.log
SECONDS=0
timeout ${TUNE_S:-170} python3 -m tuner tune --backend cuda --op mse --op l1 --op kl_div --op kl_div-log --dtype float32 --dtype float16 --dtype bfloat16 \
  --shape 2^26 --reduction none --reduction mean --trials ${TRIALS:-5} --min-time 0.01 --storage $OUT/journal.log --no-progress > $OUT/tune.txt 2>&1
echo "tune rc=$? in ${SECONDS}s"; tail -26 $OUT/tune.txt
python3 -m tuner freeze --backend cuda --storage $OUT/journal.log >> $OUT/tune.txt 2>&1; tail -1 $OUT/tune.txt
cp kernels/configs/cuda/*.json $OUT/ 2>/dev/null
SECONDS=0
timeout ${REPORT_S:-200} python3 -m tuner bench --report --backend cuda --op mse --op l1 --op kl_div --op kl_div-log \
  --dtype float32 --dtype float16 --dtype bfloat16 --shape 2^24 --shape 2^26 --min-time 0.002 --rounds 3 --goal-rounds 5 \
  --out $OUT/report-large.json > $OUT/report-large.log 2>&1
echo "report rc=$? in ${SECONDS}s"; tail -3 $OUT/report-large.log
python3 -m tuner goals $OUT/report-large.json > $OUT/goals-large.txt 2>&1; cat $OUT/goals-large.txt
