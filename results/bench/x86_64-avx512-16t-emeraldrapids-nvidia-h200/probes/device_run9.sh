#!/usr/bin/env bash
# Run 9 on a lent GPU host (the device tool), after run 8's probe set the reduce walk's split to
# 4 lanes at most (REDUCE_LANES): the reduce tests on CUDA (the bit order, every sampled config
# bitwise, KL's sums back against the reference), the 2^22 KL rows of `bench --report` (contiguous,
# broadcast, transposed and summed: the summed rows are the ones the split changes), then the rest
# of run 8's tests, which outran their box there. Every stage time-boxed, outputs in $OUT.
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
exec > >(tee $OUT/console.txt) 2>&1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
date -u; python3 -c "from kernels import frozen; print('kernel hashes', {op: frozen.kernel_hash('cuda', op) for op in ('mse', 'l1', 'kl_div')})"
TESTS="tests/kernels/test_triton_tiles.py tests/kernels/test_configs.py tests/kernels/test_accuracy.py"
SECONDS=0
timeout ${TEST_S:-60} python3 -m pytest -q -n 16 -p no:cacheprovider -p no:benchmark $TESTS -k "cuda and (reduce or sums)" > $OUT/tests-reduce.txt 2>&1
echo "reduce tests rc=$? in ${SECONDS}s"; grep -E "passed|failed|FAILED|Error" $OUT/tests-reduce.txt | tail -8
SECONDS=0
timeout ${REPORT_S:-120} python3 -m tuner bench --report --backend cuda --op kl_div --op kl_div-log --dtype float32 --dtype float16 \
  --dtype bfloat16 --shape 2^22 --min-time 0.002 --rounds 3 --goal-rounds 5 --out $OUT/report-kl-2p22.json > $OUT/report-kl-2p22.log 2>&1
echo "report rc=$? in ${SECONDS}s"; grep -E "summed" $OUT/report-kl-2p22.log | head -12
SECONDS=0
timeout ${REST_S:-80} python3 -m pytest -q -n 16 -p no:cacheprovider -p no:benchmark $TESTS -k "cuda and not (reduce or sums) and (kl or walk or tile)" > $OUT/tests-rest.txt 2>&1
echo "other tests rc=$? in ${SECONDS}s"; grep -E "passed|failed|FAILED|Error" $OUT/tests-rest.txt | tail -8
