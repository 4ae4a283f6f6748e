"""A/B: bench --report's layout rows (transposed and broadcast, 2^22, each beside its contiguous
partner) timed run by run (timing.Grain.RUN, what the report does today) against launch by launch
(timing.Grain.LAUNCH, its roofline rows' grain since section 100), alternating, same rows, same
rounds (7, the report's --goal-rounds) and min_time (0.05 s). Reads, per row and grain: the
layout's cost (x over the partner, median of the round ratios), its swing across the rounds
(max/min of the round ratios), the kernel's and the partner's medians, the copy's swing.
Usage: layout_grain_ab.py [pairs]"""

import dataclasses
import sys
import time

import torch

from kernels import timing
from kernels.modes import Op, Reduction
from tuner import bench
from tuner.problems import Case, InputLayout

N = 2**22
T, B = InputLayout.TRANSPOSED, InputLayout.BROADCAST
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
NONE, MEAN = Reduction.NONE, Reduction.MEAN
ROWS = [
    (Op.MSE, F16, MEAN, False, T),
    (Op.MSE, BF16, NONE, False, T),
    (Op.L1, BF16, NONE, False, T),
    (Op.KL_DIV, F32, MEAN, False, T),
    (Op.KL_DIV, F16, NONE, False, T),
    (Op.KL_DIV, F16, MEAN, False, T),
    (Op.KL_DIV, BF16, MEAN, False, T),
    (Op.KL_DIV, F32, MEAN, True, T),
    (Op.MSE, F32, NONE, False, B),
    (Op.KL_DIV, BF16, NONE, True, B),
]


def main() -> None:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S')}, {pairs} pairs, rounds 7, min_time 0.05 s")
    print("row  grain  pair  x_partner  x_swing  tuned_us  partner_us  copy_swing  cpu_wait")
    for op, dt, red, log, lay in ROWS:
        partner = Case(op, dt, (N,), red, log_target=log)
        case = dataclasses.replace(partner, layout=lay)
        name = f"{op.value}{'-log' if log else ''}/{str(dt)[6:]}/{lay.value}/{red.name.lower()}"
        for p in range(pairs):
            order = (timing.Grain.RUN, timing.Grain.LAUNCH) if p % 2 == 0 else (timing.Grain.LAUNCH, timing.Grain.RUN)
            for grain in order:
                r = bench.bench_case(case, "cpu", min_time_s=0.05, rounds=7, partner=partner, grain=grain, seed=p)
                xs = r.contiguous_x_rounds
                cs = r.copy_gbps_rounds
                print(
                    f"{name}  {grain.value}  {p}  {r.contiguous_x:.3f}  {max(xs) / min(xs):.3f}"
                    f"  {r.tuned_s * 1e6:.0f}  {r.contiguous_s * 1e6:.0f}  {max(cs) / min(cs):.3f}"
                    f"  {r.cpu_wait if r.cpu_wait is None else round(r.cpu_wait, 3)}",
                    flush=True,
                )
    print("# done", time.strftime("%H:%M:%S"))


if __name__ == "__main__":
    main()
