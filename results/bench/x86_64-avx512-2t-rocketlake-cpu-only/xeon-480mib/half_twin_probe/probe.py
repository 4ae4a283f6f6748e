"""Prototype probe (section 110): the kl_div-log float16 transposed 0-d 2^22 row at the chip table's config,
timed in this checkout: 7 rounds of timing.measure, us per round and their median.

Run from a checkout: PYTHONPATH=. python results/bench/<machine>/xeon-480mib/half_twin_probe/probe.py base
"""

import statistics
import sys

import torch

from kernels import timing
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner import study as st
from tuner.problems import Case, InputLayout

CONFIG = {
    "cores": 2,
    "defer_out": True,
    "fused": False,
    "multibuffer": False,
    "num_warps": 0,
    "paired": False,
    "prefetch": 0,
    "stream": True,
    "sub_tile": 0,
    "tile": 4096,
    "transpose_in": False,
    "transpose_row": 32,
    "variant": "strided",
}
case = Case(Op.KL_DIV, torch.float16, (1 << 22,), Reduction.MEAN, log_target=True, layout=InputLayout.TRANSPOSED)
bench = st._Bench.make(case, "cpu")
ex = bench.executor(Tiling.from_dict(CONFIG))
print("check:", bench.check(ex))
meds = [timing.measure(bench.runner(ex), "cpu", min_time_s=0.2).median_s * 1e6 for _ in range(7)]
print(sys.argv[1], "us per round:", [round(m, 1) for m in meds], "median", round(statistics.median(meds), 1))
