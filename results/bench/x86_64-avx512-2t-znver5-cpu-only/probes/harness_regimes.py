"""kl_div 16-bit 0-d transposed at 2^22: the fused walk's half rows with ordinary against streamed
stores, under the harness variations that might explain why the tuner's finalists read streamed at
0.89x of ordinary (14 rounds, kl_div bfloat16, resweep.txt's decision) where the probes read it at
1.14-1.26x (results/performance.md, section 94): each config into its own out or both into one
shared out (the finalists share bench.out); ``vendor``: torch's kernel among the rounds (the
finalists time it); ``dispatch``: the public call's launcher (the finalists' runner) instead of
the backend's launch; ``alone``: no contiguous partner in the rounds (the finalists have none); MT
the min-time a round (the tuner's 0.05 s, the probes' 0.15 s). Run from the repository root:

    [MT=0.05] python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/harness_regimes.py \
        bfloat16 kl_div mean [vendor] [dispatch] [alone]

Not part of the package.
"""

import dataclasses
import statistics
import sys

import torch

from kernels import dispatch, timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling, Variant
from tuner.goals import spread
from tuner.problems import Case, InputLayout

B = CpuBackend()
dtype = getattr(torch, sys.argv[1]) if len(sys.argv) > 1 else torch.bfloat16
op = Op(sys.argv[2]) if len(sys.argv) > 2 else Op.KL_DIV
red = Reduction[sys.argv[3].upper()] if len(sys.argv) > 3 else Reduction.MEAN
case = Case(op, dtype, (1 << 22,), red, layout=InputLayout.TRANSPOSED)
flat = Case(case.op, case.dtype, case.shape, case.reduction)
base = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, transpose_row=32, fused=True)
configs = [base, dataclasses.replace(base, stream=True)]
g, x, t = case.inputs("cpu")
shared = case.out_like(x)
names, runs = [], []
for share in (False, True):
    for c in configs:
        out = shared if share else case.out_like(x)
        ex = case.phase_one(g, x, t, out, "cpu", config=c)
        names.append(("shared " if share else "own    ") + c.short())
        runs.append((lambda _, ex=ex: dispatch.run(ex)) if "dispatch" in sys.argv else (lambda _, ex=ex: B.launch(ex)))
alone = "alone" in sys.argv  # no partner in the rounds: the problem's operands may stay in the L3
if alone:
    runs.append(runs[0])  # the first config again stands in as the divisor
else:
    fg, fx, ft = flat.inputs("cpu")
    fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu")
    runs.append(lambda _, ex=fex: B.launch(ex))
if "vendor" in sys.argv:  # torch's own kernel among the rounds, as the tuner's finalists and the report time it
    vendor = case.baseline()
    runs.insert(len(runs) - 1, lambda _: vendor(g, x, t))
    names.append("vendor")
m = timing.interleaved(runs, rounds=7, min_time_s=float(__import__("os").environ.get("MT", "0.15")))
what = "ALONE (over own ordinary again) " if alone else ""
among = " (torch among the rounds)" if "vendor" in sys.argv else ""
print(f"## {case.label()} {what}partner {m[-1].median_s * 1e6:.0f} us{among}")
for n, r in zip(names, m[: len(names)], strict=True):
    ratios = [a / b for a, b in zip(r.medians, m[-1].medians, strict=True)]
    print(f"  {n:60s} {r.median_s * 1e6:7.0f} us {statistics.median(ratios):.2f} ({spread(ratios, '.2f')})")
