"""Section 79: how far apart two runs of one config read, round by round, in the tuner's rounds.

The tuner's gate keeps a winner only if it beat the baseline by 2% or more in every interleaved
round (tuner.study.decide). At 2^21 it kept the default for kl_div float32's transposed walk, whose
tile 32768 read 0.73-0.82x the default in three probe runs, and 10x longer rounds (tune
--min-time 0.5) did not change that. This times, in ``timing.interleaved`` rounds as the tuner
does, the transposed walk's default config twice (each on an out of its own: a control) and at tile
32768, and prints each one's per-round ratio over the first default: the control's spread is the
floor no gate on those rounds can see under.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/gate_control.py [ROUNDS] [LOG2...]

Each size at min_time 0.05 s (the tuner's default) and 0.5 s. Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from kernels import dispatch, timing
from kernels.modes import Op, Reduction
from tuner.goals import spread
from tuner.problems import Case, InputLayout
from tuner.study import round_ratios

TALL = 32768  # the tile kl_div float32 full's study found best at 2^21 (section 78)


def row(log2: int, rounds: int, min_time_s: float) -> None:
    case = Case(Op.KL_DIV, torch.float32, (1 << log2,), Reduction.NONE, layout=InputLayout.TRANSPOSED)
    g, x, t = case.inputs("cpu")
    default = case.phase_one(g, x, t, case.out_like(x), "cpu").space.default
    configs = (default, default, dataclasses.replace(default, tile=TALL))
    exs = [case.phase_one(g, x, t, case.out_like(x), "cpu", config=c) for c in configs]
    for ex in exs:
        dispatch.run(ex)
    assert all(torch.equal(exs[0].out.view(torch.int32), ex.out.view(torch.int32)) for ex in exs), "bits differ"
    measured = timing.interleaved([lambda _, e=e: dispatch.run(e) for e in exs], rounds=rounds, min_time_s=min_time_s)
    cells = []
    for name, i in (("default again", 1), (f"tile {TALL}", 2)):
        r = round_ratios(measured[0].medians, measured[i].medians)
        cells.append(f"{name} {statistics.median(r):.2f} ({spread(r, '.2f')}): " + " ".join(f"{v:.2f}" for v in r))
    us = measured[0].median_s * 1e6
    print(f"| 2^{log2} | {min_time_s} | {us:.0f} | {' | '.join(cells)} |", flush=True)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    sizes = [int(a) for a in sys.argv[2:]] or [20, 21, 22]
    head = f"# kl_div float32 full, transposed walk, {rounds} interleaved rounds"
    print(f"{head}; over the first default: median (min-max): each round")
    print("| size | min_time s | default us | the default again | the tall tile |")
    print("|---|---|---|---|---|")
    for log2 in sizes:
        for min_time_s in (0.05, 0.5):
            row(log2, rounds, min_time_s)


if __name__ == "__main__":
    main()
