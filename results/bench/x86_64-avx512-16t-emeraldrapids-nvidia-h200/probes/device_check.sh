#!/usr/bin/env bash
# Run 1 on a lent GPU host (the device tool): the CUDA backend's tests and a short bench, every
# stage time-boxed, every output under $OUT. Needs optuna's wheels in .whl (the image has no optuna).
set -u
cd "$(dirname "$0")/../../../.."
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
  python3 -c "import torch, triton, numba, optuna; print('torch', torch.__version__, 'triton', triton.__version__, 'numba', numba.__version__, 'optuna', optuna.__version__)"
  python3 -m tuner doctor; python3 -m tuner machine --json; } > $OUT/env.txt 2>&1
cat $OUT/env.txt
tests="tests/kernels/test_accuracy.py tests/kernels/test_examples.py tests/kernels/test_configs.py tests/kernels/test_plan_order.py tests/kernels/test_triton_tiles.py tests/kernels/test_errors.py"
SECONDS=0
timeout ${TEST_S:-200} python3 -m pytest -q -n 12 -k "cuda" -p no:cacheprovider $tests > $OUT/tests.txt 2>&1
echo "tests rc=$? in ${SECONDS}s"; tail -15 $OUT/tests.txt
SECONDS=0
timeout ${BENCH_S:-150} python3 -m tuner bench --backend cuda --op mse --op l1 --op kl_div --op kl_div-log --dtype float32 --dtype bfloat16 \
  --shape 2^10 --shape 2^26 --reduction none --reduction mean --min-time 0.005 --rounds 3 > $OUT/bench.txt 2>&1
echo "bench rc=$? in ${SECONDS}s"; cat $OUT/bench.txt | tail -20
SECONDS=0
timeout ${LAYOUT_S:-120} python3 -m tuner bench --backend cuda --op mse --op kl_div-log --dtype float32 --dtype float16 --shape 2^22 \
  --layout transposed --layout broadcast --layout summed --reduction none --reduction mean --min-time 0.005 --rounds 3 > $OUT/layouts.txt 2>&1
echo "layouts rc=$? in ${SECONDS}s"; tail -20 $OUT/layouts.txt
