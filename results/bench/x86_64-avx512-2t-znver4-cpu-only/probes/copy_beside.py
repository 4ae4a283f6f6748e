"""The 2^24 bfloat16 0-d yardstick (one copy's buffers, 64 MiB moved) alone, beside kl_div's and
kl_div-log's kernel, and alone again, twice over, in one process (section 46): does the copy's
speed depend on the kernel timed beside it, or on the moment?

    .venv/bin/python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/copy_beside.py
"""

from __future__ import annotations

import statistics

import torch

from kernels import backends, timing
from kernels.modes import Op, Reduction
from tuner.problems import Case

LAUNCH = backends.get("cpu").launch


def rate(moved: int, r: timing.Rounds) -> str:
    rates = [moved / m / 1e9 for m in r.medians]
    return f"{statistics.median(rates):5.1f} ({min(rates):.1f}-{max(rates):.1f})"


copy, moved = timing.copy_probe("cpu", 64 << 20)
for log in (False, True, False, True):
    case = Case(Op.KL_DIV, torch.bfloat16, (2**24,), Reduction.MEAN, log_target=log)
    g, x, t = case.inputs("cpu")
    ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
    (alone,) = timing.interleaved([copy], rounds=5, min_time_s=0.1)
    k, c = timing.interleaved([lambda _, ex=ex: LAUNCH(ex), copy], rounds=5, min_time_s=0.1)
    (after,) = timing.interleaved([copy], rounds=5, min_time_s=0.1)
    print(
        f"{case.label()}: copy alone {rate(moved, alone)}, beside the kernel {rate(moved, c)},"
        f" kernel {rate(moved, k)}, copy alone after {rate(moved, after)}",
        flush=True,
    )
