#!/usr/bin/env bash
# Run 6 on a lent GPU host (the device tool), after KL log_target's 16-bit formula through the
# device's exp2 (triton_loops._kl_log_narrow) and bfloat16 outs through CUDA's round-to-nearest cast
# (RNE): the CUDA accuracy tests, the 20 studies whose kernels changed (every bfloat16 entry and
# kl_div-log float16, 2^24 and 2^26, full and 0-d; the 25 others were restamped by TTIR), then
# kl_div-log float32 at 2^26, freeze, and the 2^24/2^26 rows; every stage time-boxed, outputs in $OUT.
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  python3 -c "import sys, torch, triton, optuna; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'optuna', optuna.__version__)"
  python3 -c "from kernels import frozen; print('kernel hashes', {op: frozen.kernel_hash('cuda', op) for op in ('mse', 'l1', 'kl_div')})"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
SECONDS=0
timeout ${TEST_S:-120} python3 -m pytest -q -n 8 -p no:cacheprovider tests/kernels/test_accuracy.py tests/kernels/test_triton_narrow.py -k cuda > $OUT/tests.txt 2>&1
echo "tests rc=$? in ${SECONDS}s"; grep -E "passed|failed|Error" $OUT/tests.txt | tail -8
cp results/tuning/cuda-nvidia-h200.log $OUT/journal.log
SECONDS=0
tune() { python3 -m tuner tune --backend cuda --shape 2^24 --shape 2^26 --reduction none --reduction mean --trials ${TRIALS:-5} \
  --min-time 0.01 --storage $OUT/journal.log --no-progress "$@" >> $OUT/tune.txt 2>&1; }
timeout ${TUNE_S:-230} bash -c "$(declare -f tune); tune --op kl_div-log --dtype float16 --dtype bfloat16 && tune --op kl_div --op l1 --op mse --dtype bfloat16 && tune --op kl_div-log --dtype float32"
echo "tune rc=$? in ${SECONDS}s"; grep -c "best" $OUT/tune.txt; tail -4 $OUT/tune.txt
python3 -m tuner freeze --backend cuda --storage $OUT/journal.log >> $OUT/tune.txt 2>&1; tail -1 $OUT/tune.txt
cp kernels/configs/cuda/*.json $OUT/ 2>/dev/null
SECONDS=0
timeout ${REPORT_S:-140} python3 -m tuner bench --report --backend cuda --op mse --op l1 --op kl_div --op kl_div-log \
  --dtype float32 --dtype float16 --dtype bfloat16 --shape 2^24 --shape 2^26 --min-time 0.002 --rounds 3 --goal-rounds 5 \
  --out $OUT/report-large.json > $OUT/report-large.log 2>&1
echo "report rc=$? in ${SECONDS}s"; tail -3 $OUT/report-large.log
python3 -m tuner goals $OUT/report-large.json > $OUT/goals-large.txt 2>&1; cat $OUT/goals-large.txt | tail -40
