"""Section 81: how often the gate keeps a winner that is the baseline's own config, with and
without the confirmation in fresh rounds.

The finalists pick the lowest median of up to five contenders and read the gate (tuner.study.settle:
MIN_GAIN and the rank test against the control) on the same rounds that picked it. Here every
contender is the same config (the default, each on an executor of its own, as the finalists build
them), so every keep is a false one. Each trial times, as ``tuner.study._finalists`` does, the
baseline, four "challengers", the control and the vendor in interleaved rounds, settles, and where
the winner was kept times the baseline, the winner and the control again and confirms
(``tuner.study.confirm``). It prints, per case, the trials whose first rounds kept a challenger and
those the fresh rounds confirmed, with the chance each read.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/gate_same.py [TRIALS] [ROUNDS]

Not part of the package.
"""

from __future__ import annotations

import statistics
import sys

import torch

from kernels import timing
from kernels.modes import Op, Reduction
from tuner.problems import Case
from tuner.study import _Bench, confirm, settle

CASES = {
    "mse float32 full contiguous 2^20": Case(Op.MSE, torch.float32, (1 << 20,), Reduction.NONE),
    "l1 float32 0-d contiguous 2^20": Case(Op.L1, torch.float32, (1 << 20,), Reduction.MEAN),
}
CHALLENGERS = 4


def main() -> None:
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    print(f"# every contender the default's config; {trials} trials of {rounds} rounds, min_time 0.05 s")
    print("| case | trials | first rounds kept | confirmed | chances of the first keeps | their medians |")
    print("|---|---|---|---|---|---|")
    for name, case in CASES.items():
        bench = _Bench.make(case, "cpu")
        default = bench.executor(None).space.default
        runs = [bench.runner(bench.executor(default)) for _ in range(CHALLENGERS + 2)]  # + baseline, control
        vendor = case.baseline()
        runs.append(lambda _, v=vendor, b=bench: v(b.g, b.x, b.t))
        kept, stood, chances, medians = 0, 0, [], []
        for seed in range(trials):
            timed = timing.interleaved(runs, bench.out.device, rounds=rounds, min_time_s=0.05, seed=seed)
            n = CHALLENGERS + 1
            each = [list(t.medians) for t in timed]
            settled = settle([t.median_s for t in timed[:n]], each[:n], 0, each[n])
            if not settled.switched:
                continue
            kept += 1
            chances.append(f"{settled.chance:.3f}")
            medians.append(f"{statistics.median(settled.ratios):.2f}")
            again = [runs[0], runs[settled.winner], runs[n]]
            fresh = timing.interleaved(again, bench.out.device, rounds=rounds, min_time_s=0.05, seed=seed + 1000)
            _, record = confirm(settled, 0, [list(t.medians) for t in fresh])
            stood += record.kept
        print(f"| {name} | {trials} | {kept} | {stood} | {', '.join(chances)} | {', '.join(medians)} |", flush=True)


if __name__ == "__main__":
    main()
