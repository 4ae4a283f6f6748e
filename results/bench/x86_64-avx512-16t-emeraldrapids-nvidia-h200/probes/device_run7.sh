#!/usr/bin/env bash
# Run 7 on a lent GPU host (the device tool), after _kl_log_narrow's sign fix: the narrow tests and
# KL's CUDA accuracy tests, kl_div-log float16/bfloat16's 8 studies re-tuned (their kernels changed),
# freeze, then the full `bench --report`; every stage time-boxed, outputs in $OUT.
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
SECONDS=0
timeout ${TEST_S:-60} python3 -m pytest -q -n 8 -p no:cacheprovider tests/kernels/test_triton_narrow.py tests/kernels/test_accuracy.py -k "cuda and (narrow or kl)" > $OUT/tests.txt 2>&1
echo "tests rc=$? in ${SECONDS}s"; grep -E "passed|failed|FAILED" $OUT/tests.txt | tail -6
cp results/tuning/cuda-nvidia-h200.log $OUT/journal.log
SECONDS=0
timeout ${TUNE_S:-80} python3 -m tuner tune --backend cuda --op kl_div-log --dtype float16 --dtype bfloat16 --shape 2^24 --shape 2^26 \
  --reduction none --reduction mean --trials ${TRIALS:-5} --min-time 0.01 --storage $OUT/journal.log --no-progress > $OUT/tune.txt 2>&1
echo "tune rc=$? in ${SECONDS}s"; tail -9 $OUT/tune.txt
python3 -m tuner freeze --backend cuda --storage $OUT/journal.log >> $OUT/tune.txt 2>&1; tail -1 $OUT/tune.txt
cp kernels/configs/cuda/*.json $OUT/ 2>/dev/null
SECONDS=0
timeout ${REPORT_S:-235} python3 -m tuner bench --report --backend cuda --op mse --op l1 --op kl_div --op kl_div-log \
  --dtype float32 --dtype float16 --dtype bfloat16 --min-time 0.002 --rounds 3 --goal-rounds 5 --out $OUT/report.json > $OUT/report.log 2>&1
echo "report rc=$? in ${SECONDS}s"; tail -3 $OUT/report.log
python3 -m tuner goals $OUT/report.json > $OUT/goals.txt 2>&1; tail -40 $OUT/goals.txt
