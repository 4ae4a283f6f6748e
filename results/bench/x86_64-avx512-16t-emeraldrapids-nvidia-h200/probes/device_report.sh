#!/usr/bin/env bash
# Run 2 on a lent GPU host (the device tool): tune the 2^24 buckets, freeze them, then the full
# `bench --report` against the frozen table; every stage time-boxed, every output under $OUT.
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
SECONDS=0
timeout ${TUNE_S:-120} python3 -m tuner tune --backend cuda --op mse --op l1 --op kl_div --op kl_div-log --dtype float32 --dtype bfloat16 \
  --shape 2^24 --reduction none --reduction mean --trials ${TRIALS:-4} --min-time 0.01 --storage $OUT/journal.log --no-progress > $OUT/tune.txt 2>&1
echo "tune rc=$? in ${SECONDS}s"; tail -20 $OUT/tune.txt
python3 -m tuner freeze --backend cuda --storage $OUT/journal.log >> $OUT/tune.txt 2>&1; tail -1 $OUT/tune.txt
cp kernels/configs/cuda/*.json $OUT/ 2>/dev/null
SECONDS=0
timeout ${REPORT_S:-400} python3 -m tuner bench --report --backend cuda --op mse --op l1 --op kl_div --op kl_div-log \
  --dtype float32 --dtype float16 --dtype bfloat16 --min-time 0.002 --rounds 3 --goal-rounds 5 --out $OUT/report.json > $OUT/report.log 2>&1
echo "report rc=$? in ${SECONDS}s"; tail -30 $OUT/report.log
