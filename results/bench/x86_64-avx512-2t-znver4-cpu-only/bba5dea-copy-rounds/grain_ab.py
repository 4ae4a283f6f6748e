"""A/B: bench --report's rows timed run by run (each run's samples together, the library's
timing.interleaved) against launch by launch (one launch of each run in turn: the prototype of
timing.Grain.LAUNCH, without its clock lead, which only CUDA uses), alternating, same rows, same
rounds. Reads how well a round's copy pairs with its kernel. Usage: grain_ab.py [pairs]"""

import math
import random
import statistics as st
import sys
import time

import torch

from kernels import timing
from kernels.modes import Op, Reduction
from tuner import bench
from tuner.problems import Case

ORIG = timing.interleaved


# grain: the keyword bench_case passes since 9e3c464 (this ran at bba5dea, before it); ignored here.
def by_launch(runs, device="cpu", *, rounds, min_time_s=0.1, seed=0, spans=(), grain=None):  # noqa: ANN001, ANN201
    kinds = tuple(spans) or (timing.Span.DEVICE,) * len(runs)
    device = torch.device(device)
    med: list[list[float]] = [[] for _ in runs]
    alls: list[list[float]] = [[] for _ in runs]
    order = list(range(len(runs)))
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        clocks = [timing._Clock(device, k) for k in kinds]
        for i in order:
            runs[i](0)
            runs[i](0)
        samples: list[list[float]] = [[] for _ in runs]
        total = 0.0
        while total < min_time_s * len(runs) or min(map(len, samples)) < 5:
            for i in order:
                dt = clocks[i].time(lambda i=i: runs[i](0))
                samples[i].append(dt)
                total += dt
        for i in range(len(runs)):
            med[i].append(st.median(samples[i]))
            alls[i].extend(samples[i])
    return [timing.Rounds(tuple(m), tuple(s)) for m, s in zip(med, alls, strict=True)]


CASES = [
    Case(Op.MSE, torch.float32, (2**24,), Reduction.NONE),
    Case(Op.L1, torch.float16, (2**24,), Reduction.MEAN),
    Case(Op.KL_DIV, torch.bfloat16, (2**24,), Reduction.MEAN, log_target=True),
]


def stats(row: bench.BenchRow) -> str:
    c, p = row.copy_gbps_rounds, row.roofline_pct_rounds
    k = [pp * cc / 100 for pp, cc in zip(p, c, strict=True)]

    def sw(v: list[float] | tuple[float, ...]) -> float:
        return max(v) / min(v)

    cor = st.correlation([math.log(v) for v in k], [math.log(v) for v in c])
    return (
        f"roofline {row.roofline_pct:5.1f}% ({min(p):.0f}-{max(p):.0f}) kernel swing {sw(k):.2f} copy swing"
        f" {sw(c):.2f} ratio swing {sw(p):.2f} corr {cor:+.2f} copy {row.copy_gbps:.1f} wait {row.cpu_wait:.1%}"
        f" tuned {row.tuned_s * 1e3:.2f}ms"
    )


for rep in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    for case in CASES:
        pair = (("run", ORIG), ("launch", by_launch))
        for name, fn in pair if rep % 2 == 0 else pair[::-1]:
            timing.interleaved = fn
            t0 = time.perf_counter()
            row = bench.bench_case(case, "cpu", min_time_s=0.05, rounds=7)
            print(f"{rep} {case.label():40s} {name:6s} {stats(row)} [{time.perf_counter() - t0:.0f}s]", flush=True)
