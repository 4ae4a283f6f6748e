"""Section 81: mse float32 2^20 full's streamed tile 256, which one README main job kept.

Times in interleaved rounds in one process: the lookup's config, the default and flat tile 256
streamed (each on an executor of its own; the lookup is the default's config where the table's
entry is the default), and l1's and kl_div's lookups beside them; each one's round ratios over
the lookup's: median (min-max).

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/stream_2p20.py [ROUNDS]

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from kernels import dispatch, timing
from kernels.executor import Executor
from kernels.modes import Op, Reduction
from tuner.problems import Case
from tuner.study import round_ratios


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    exs: list[Executor] = []
    names: list[str] = []
    for name, op in (("mse", Op.MSE), ("l1", Op.L1), ("kl_div", Op.KL_DIV)):
        case = Case(op, torch.float32, (1 << 20,), Reduction.NONE)
        g, x, t = case.inputs("cpu")
        ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
        exs.append(ex)
        names.append(f"{name} lookup {ex.config.short()} [{ex.config_source}]")
        if name == "mse":
            d = ex.space.default
            for c in (d, dataclasses.replace(d, tile=256, stream=True)):
                exs.append(case.phase_one(g, x, t, case.out_like(x), "cpu", config=c))
                names.append(f"mse {c.short()}")
    for e in exs:
        dispatch.run(e)
    print(f"# float32 2^20 full contiguous, {rounds} rounds, min_time 0.1 s; over mse's lookup: median (min-max)")
    m = timing.interleaved([lambda _, e=e: dispatch.run(e) for e in exs], rounds=rounds, min_time_s=0.1)
    for name, r in zip(names, m, strict=True):
        rr = round_ratios(list(m[0].medians), list(r.medians))
        print(f"{name}: {r.median_s * 1e6:.1f} us; {statistics.median(rr):.2f} ({min(rr):.2f}-{max(rr):.2f})")


if __name__ == "__main__":
    main()
