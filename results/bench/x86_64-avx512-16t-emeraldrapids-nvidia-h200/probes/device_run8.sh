#!/usr/bin/env bash
# Run 8 on a lent GPU host (the device tool), after the reduce walk's sums were split over lanes
# (triton_loops.reduce_lanes): the Triton tile and reduce tests, the reduce configs' bitwise test and
# KL's accuracy tests on CUDA; probes/reduce_lanes.py (the split's lane counts against the walk
# before it, OLD_LOOPS: `git show bd862bc:kernels/backends/triton_loops.py`); then the full
# `bench --report` against the committed table, one op at a time (a report is written only when it
# ends: a box that runs out loses one op's rows, not all). Every stage time-boxed, outputs in $OUT:
# console.txt, tests.txt, probe.txt, reports.tar (the four ops' report .json/.txt/.log).
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
OLD_LOOPS=${OLD_LOOPS:-results/tmp/triton_loops_old.py}
exec > >(tee $OUT/console.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
python3 -c "import sys, torch, triton, optuna; print(sys.version.split()[0], 'torch', torch.__version__, 'triton', triton.__version__, 'optuna', optuna.__version__)"
python3 -c "from kernels import frozen; print('kernel hashes', {op: frozen.kernel_hash('cuda', op) for op in ('mse', 'l1', 'kl_div')})"
SECONDS=0
timeout ${TEST_S:-110} python3 -m pytest -q -n 8 -p no:cacheprovider tests/kernels/test_triton_tiles.py tests/kernels/test_configs.py \
  tests/kernels/test_accuracy.py -k "cuda and (reduce or kl or walk or tile)" > $OUT/tests.txt 2>&1
echo "tests rc=$? in ${SECONDS}s"; grep -E "passed|failed|FAILED|Error" $OUT/tests.txt | tail -8
SECONDS=0
timeout ${PROBE_S:-110} python3 results/bench/x86_64-avx512-16t-emeraldrapids-nvidia-h200/probes/reduce_lanes.py $OLD_LOOPS 3 > $OUT/probe.txt 2>&1
echo "probe rc=$? in ${SECONDS}s"; grep -v "^config" $OUT/probe.txt | tail -16
mkdir -p /tmp/r
for spec in kl_div:95 kl_div-log:95 mse:65 l1:65; do
  op=${spec%:*}; SECONDS=0
  timeout ${spec#*:} python3 -m tuner bench --report --backend cuda --op $op --dtype float32 --dtype float16 --dtype bfloat16 \
    --min-time 0.002 --rounds 3 --goal-rounds 5 --out /tmp/r/report-$op.json > /tmp/r/report-$op.log 2>&1
  echo "report $op rc=$? in ${SECONDS}s"
done
python3 -m tuner goals /tmp/r/report-*.json > /tmp/r/goals.txt 2>&1; tail -40 /tmp/r/goals.txt
tar -cf $OUT/reports.tar -C /tmp/r .
