"""Section 80: what widens the control's rounds in the tuner's finalists.

The control gate's first runs (tune-transposed-control.txt) read the baseline's config against
itself at 0.50-2.67 per round at 2^21 (median spread 0.34) and 0.88-1.24 at 2^24 for mse bfloat16,
wider than section 79's gate_control.py (three configs per round: 0.85-1.19 at 2^21, 0.91-1.07 at
2^22). The finalists' rounds also hold three more configs and the vendor (PyTorch's eager formula,
which allocates its temporaries anew each call). This times, through the tuner's own ``_Bench`` and
``timing.interleaved`` as ``tuner.study._finalists`` does, the default and the control alone, with
the vendor, with three other configs, and with both, and prints the control's per-round ratio
over the default: median (min-max), its spread and its quartiles.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/gate_vendor.py [ROUNDS]

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from kernels import timing
from kernels.modes import Op, Reduction
from tuner.goals import spread
from tuner.problems import Case, InputLayout
from tuner.study import _Bench, round_ratios

CASES = {
    "kl_div float32 full transposed 2^21": (
        Case(Op.KL_DIV, torch.float32, (1 << 21,), Reduction.NONE, layout=InputLayout.TRANSPOSED),
        [{"tile": 16384}, {"tile": 32768}, {"tile": 32768, "stream": True}],
    ),
    "mse bfloat16 full contiguous 2^24": (
        Case(Op.MSE, torch.bfloat16, (1 << 24,), Reduction.NONE),
        [{"tile": 1024}, {"tile": 16384}, {"cores": 1}],
    ),
}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    print(f"# the control (the default again) over the default, {rounds} interleaved rounds, min_time 0.05 s")
    print("| case | rounds hold | control: median (min-max) | max-min | quartiles |")
    print("|---|---|---|---|---|")
    for name, (case, changes) in CASES.items():
        bench = _Bench.make(case, "cpu")
        default = bench.executor(None).space.default
        others = [bench.runner(bench.executor(dataclasses.replace(default, **c))) for c in changes]
        vendor = case.baseline()
        vendor_run = lambda _, v=vendor, b=bench: v(b.g, b.x, b.t)  # noqa: E731
        pair = [bench.runner(bench.executor(default)), bench.runner(bench.executor(default))]
        for label, extra in (
            ("default, control", []),
            ("+ vendor", [vendor_run]),
            ("+ 3 configs", others),
            ("+ 3 configs + vendor (the finalists')", [*others, vendor_run]),
        ):
            timed = timing.interleaved([*pair, *extra], bench.out.device, rounds=rounds, min_time_s=0.05)
            r = round_ratios(list(timed[0].medians), list(timed[1].medians))
            q1, _, q3 = statistics.quantiles(r, n=4)
            cell = f"{statistics.median(r):.2f} ({spread(r, '.2f')})"
            print(f"| {name} | {label} | {cell} | {max(r) - min(r):.2f} | {q1:.2f}-{q3:.2f} |", flush=True)


if __name__ == "__main__":
    main()
