"""kl_div 16-bit: the shipped narrow formula (none: value, (-t * g) * cof) against (t * -g) * cof,
which is the same to the bit (NaN's sign aside) and leaves the negation on the loop-invariant g.
Both built in one process, each row's two executors timed in the same interleaved rounds
(section 46; not landed).

    .venv/bin/python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/neg_formula.py [ROUNDS]
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from kernels import backends, dispatch, timing
from kernels.modes import Op, Reduction
from kernels.ops import kl_div
from tuner.problems import Case, InputLayout

LAUNCH = backends.get("cpu").launch
SHAPES = (
    (2**16, Reduction.MEAN, InputLayout.CONTIGUOUS),  # in L2: bound by the loop's instructions
    (2**24, Reduction.MEAN, InputLayout.CONTIGUOUS),
    (2**22, Reduction.MEAN, InputLayout.TRANSPOSED),
    (2**22, Reduction.NONE, InputLayout.TRANSPOSED),
)
rows = [Case(Op.KL_DIV, d, (n,), red, layout=lay) for d in (torch.bfloat16, torch.float16) for n, red, lay in SHAPES]
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7


def build() -> list[tuple[object, tuple[torch.Tensor, ...]]]:
    exs = []
    for c in rows:
        g, x, t = c.inputs("cpu")
        out = c.out_like(x)
        exs.append((c.phase_one(g, x, t, out, "cpu"), (g, x, t, out)))
    return exs


base = build()
dispatch.clear_plans()
kl_div.FORMULA = dataclasses.replace(
    kl_div.FORMULA, name="kl_div_neg", narrow_value=lambda g, x, t, cof: (t * -g) * cof
)
neg = build()
for c, (b, bt), (n, nt) in zip(rows, base, neg, strict=True):
    LAUNCH(b)
    LAUNCH(n)
    assert torch.equal(bt[3], nt[3]), c.label()  # bitwise the same outputs
    runs = [lambda _, e=b: LAUNCH(e), lambda _, e=n: LAUNCH(e)]
    tb, tn = timing.interleaved(runs, rounds=ROUNDS, min_time_s=0.1)
    r = [a / z for a, z in zip(tn.medians, tb.medians, strict=True)]
    print(
        f"{c.label()} {b.config.short()}: shipped {tb.median_s * 1e6:.0f} us, t*-g {tn.median_s * 1e6:.0f} us,"
        f" ratio {statistics.median(r):.3f} ({min(r):.3f}-{max(r):.3f})",
        flush=True,
    )
