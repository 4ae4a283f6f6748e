"""A/B: the tuner's finalist gate (study.decide: the winner's round ratios over the baseline's
against a control, the baseline's config on an executor of its own, Mann-Whitney at ALPHA) on
rounds timed run by run (timing.Grain.RUN, what study._finalists does today) and launch by launch
(timing.Grain.LAUNCH), alternating, same runs. Contenders: the default (baseline), the table's
tuned config (the winner), the control; 5 rounds, min_time 0.05 s (TuneOptions' defaults).
Reads per case and grain: the median ratio, the spread of the winner's and the control's round
ratios (max/min), the chance the gate read, and whether it kept the winner.
Usage: gate_grain_ab.py [pairs]"""

import sys
import time

import torch

from kernels import timing
from kernels.modes import Op, Reduction
from tuner import study
from tuner.problems import Case

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
CASES = [
    Case(Op.L1, BF16, (2**24,), Reduction.NONE),
    Case(Op.KL_DIV, BF16, (2**24,), Reduction.MEAN, log_target=True),
    Case(Op.MSE, F16, (2**24,), Reduction.MEAN),
    Case(Op.KL_DIV, F32, (2**24,), Reduction.NONE),
]


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, {pairs} pairs, rounds 5, min_time 0.05 s")
    print("case  tuned_config  grain  pair  median_ratio  ratio_swing  control_swing  chance  kept")
    for case in CASES:
        b = study._Bench.make(case, "cpu")
        tuned = b.executor(None)
        default = b.executor(tuned.space.default)
        control = b.executor(tuned.space.default)
        for ex in (tuned, default):
            wrong = b.check(ex)
            assert wrong is None, wrong
        runs = [b.runner(default), b.runner(tuned), b.runner(control)]
        for p in range(pairs):
            order = (timing.Grain.RUN, timing.Grain.LAUNCH) if p % 2 == 0 else (timing.Grain.LAUNCH, timing.Grain.RUN)
            for grain in order:
                t = timing.interleaved(runs, "cpu", rounds=5, min_time_s=0.05, seed=p, grain=grain)
                v = study.decide(list(t[0].medians), list(t[1].medians), list(t[2].medians))
                med = sorted(v.ratios)[len(v.ratios) // 2]
                print(
                    f"{case.label()}  {tuned.config.short()}  {grain.value}  {p}  {med:.3f}"
                    f"  {max(v.ratios) / min(v.ratios):.3f}  {max(v.control) / min(v.control):.3f}"
                    f"  {v.chance:.3f}  {v.kept}",
                    flush=True,
                )
    print("# done", time.strftime("%H:%M:%S"))


if __name__ == "__main__":
    main()
