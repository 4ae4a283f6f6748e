"""Time _Bench.check per call for op:dtype:log2n cases (mean: a 0-d gradient), after a first call.

Run from a checkout: PYTHONPATH=. python results/bench/<machine>/xeon-480mib/check_memo/check_time.py mse:float32:24
"""

import sys
import time

import torch

from kernels.modes import Reduction
from tuner import study as st
from tuner.problems import Case, Op

for spec in sys.argv[1:]:
    op, dt, lg = spec.split(":")
    log = op.endswith("-log")
    case = Case(Op(op.removesuffix("-log")), getattr(torch, dt), (1 << int(lg),), Reduction.MEAN, log_target=log)
    bench = st._Bench.make(case, "cpu")
    ex = bench.executor(None)
    bench.check(ex)
    ts = []
    for _ in range(4):
        t0 = time.perf_counter()
        m = bench.check(ex)
        ts.append(time.perf_counter() - t0)
    print(spec, m, "check ms", [round(t * 1e3) for t in ts])
