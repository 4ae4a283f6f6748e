"""Section 81: does an executor of its own make one config consistently faster or slower?

The control gate reads a winner's round ratios against a control's: the baseline's config timed
again on an executor of its own (its own out buffer). If an executor's buffers made it
consistently faster, a same-speed winner could rank below the control in every round by the luck
of its buffers, which no rank test over rounds can see. This times K executors of one config (the
default of a float32 contiguous case, the inputs shared) in interleaved rounds and prints each
one's round ratios over the first: median (min-max), the rounds below 1, and the gate's chance
against the second as the control.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/executors_same.py [LOG2_SIZE] [K] [ROUNDS] [OP]

Not part of the package.
"""

from __future__ import annotations

import statistics
import sys

import torch

from kernels import dispatch, timing
from kernels.modes import Op, Reduction
from tuner.problems import Case
from tuner.study import chance, round_ratios


def main() -> None:
    n = 1 << (int(sys.argv[1]) if len(sys.argv) > 1 else 20)
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 15
    op = {"mse": Op.MSE, "l1": Op.L1, "kl_div": Op.KL_DIV}[sys.argv[4] if len(sys.argv) > 4 else "mse"]
    case = Case(op, torch.float32, (n,), Reduction.NONE)
    g, x, t = case.inputs("cpu")
    exs = [case.phase_one(g, x, t, case.out_like(x), "cpu") for _ in range(k)]
    for e in exs:
        dispatch.run(e)
    print(f"# {case.label()}: {k} executors of {exs[0].config.short()}, {rounds} rounds, min_time 0.05 s")
    m = timing.interleaved([lambda _, e=e: dispatch.run(e) for e in exs], rounds=rounds, min_time_s=0.05)
    control = round_ratios(list(m[0].medians), list(m[1].medians))
    for i, r in enumerate(m):
        rr = round_ratios(list(m[0].medians), list(r.medians))
        below = sum(v < 1 for v in rr)
        print(
            f"executor {i}: {r.median_s * 1e6:.1f} us; over executor 0 {statistics.median(rr):.3f} "
            f"({min(rr):.2f}-{max(rr):.2f}); below 1 in {below}/{rounds}; chance against executor 1 "
            f"{chance(rr, control):.3f}"
        )


if __name__ == "__main__":
    main()
