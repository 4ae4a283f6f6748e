#!/usr/bin/env bash
# Run 4 on a lent GPU host (the device tool), after timing.Span (launch-free CUDA samples): the
# timing tests, the launch path's share (probes/launch_path.py), float16's 8 studies at 2^24 added
# to the journal, freeze, then the full `bench --report`; every stage time-boxed, outputs in $OUT.
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  python3 -c "import sys, torch, triton, optuna; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'optuna', optuna.__version__)"
  python3 -m tuner machine --json; python3 -c "from kernels import frozen; print('kernel hashes', {op: frozen.kernel_hash('cuda', op) for op in ('mse', 'l1', 'kl_div')})"; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
SECONDS=0
timeout ${TEST_S:-90} python3 -m pytest -q -n 8 -p no:cacheprovider tests/kernels/test_timing.py "tests/kernels/test_accuracy.py" -k "timing or (cuda and empty)" > $OUT/tests.txt 2>&1
echo "tests rc=$? in ${SECONDS}s"; tail -4 $OUT/tests.txt
SECONDS=0
timeout ${PROBE_S:-60} python3 results/bench/x86_64-avx512-16t-emeraldrapids-nvidia-h200/probes/launch_path.py > $OUT/launch-path.txt 2>&1
echo "probe rc=$? in ${SECONDS}s"; cat $OUT/launch-path.txt
cp results/tuning/cuda-nvidia-h200.log $OUT/journal.log
SECONDS=0
timeout ${TUNE_S:-120} python3 -m tuner tune --backend cuda --op mse --op l1 --op kl_div --op kl_div-log --dtype float16 \
  --shape 2^24 --reduction none --reduction mean --trials ${TRIALS:-7} --min-time 0.01 --storage $OUT/journal.log --no-progress > $OUT/tune.txt 2>&1
echo "tune rc=$? in ${SECONDS}s"; tail -10 $OUT/tune.txt
python3 -m tuner freeze --backend cuda --storage $OUT/journal.log >> $OUT/tune.txt 2>&1; tail -1 $OUT/tune.txt
cp kernels/configs/cuda/*.json $OUT/ 2>/dev/null
SECONDS=0
timeout ${REPORT_S:-280} python3 -m tuner bench --report --backend cuda --op mse --op l1 --op kl_div --op kl_div-log \
  --dtype float32 --dtype float16 --dtype bfloat16 --min-time 0.002 --rounds 3 --goal-rounds 5 --out $OUT/report.json > $OUT/report.log 2>&1
echo "report rc=$? in ${SECONDS}s"; tail -5 $OUT/report.log
python3 -m tuner goals $OUT/report.json > $OUT/goals.txt 2>&1; tail -30 $OUT/goals.txt
