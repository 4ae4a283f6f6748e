"""What one sweep trial of a large case spends its time on (section 109): the kernel's launch, the
size-matched copy, the vendor's call, and the reference check every trial runs before it is timed
(_Bench.check: fill out with NaN, launch, accuracy.mismatch), each with the process's user and
system CPU time and its minor page faults per call, from getrusage.

Run from a checkout, against that checkout's code:
    PYTHONPATH=. python results/bench/<machine>/xeon-480mib/tuner_check/check_probe.py kl_div bfloat16 24
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable

import torch

from kernels.modes import Reduction
from tuner import study as st
from tuner.problems import Case, Op


def _usage() -> tuple[float, float, int]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime, r.ru_minflt


def probe(name: str, fn: Callable[[int], object], n: int) -> None:
    fn(0)  # warm: compiled, pages of its own buffers touched
    u0, s0, f0 = _usage()
    w0 = time.perf_counter()
    for i in range(n):
        fn(i)
    wall = time.perf_counter() - w0
    u1, s1, f1 = _usage()
    print(
        f"{name:28s} n={n:<3d} wall {wall / n * 1e3:8.2f} ms  user {(u1 - u0) / n * 1e3:8.2f}"
        f"  sys {(s1 - s0) / n * 1e3:8.2f}  minor faults/call {(f1 - f0) / n:8.0f}"
    )


def main() -> None:
    op, dtype, log2 = Op(sys.argv[1]), getattr(torch, sys.argv[2]), int(sys.argv[3])
    case = Case(op, dtype, (1 << log2,), Reduction.MEAN)
    bench = st._Bench.make(case, "cpu")
    ex = bench.executor(None)
    print(f"{case.label()}: {bench.bytes() / 2**20:.0f} MiB moved; torch {torch.__version__}")
    probe("kernel (default config)", bench.runner(ex), 30)
    probe("size-matched copy", bench.copy, 30)
    vendor = case.baseline()
    probe("vendor", lambda _: vendor(bench.g, bench.x, bench.t), 10)
    probe("check (fill, run, mismatch)", lambda _: bench.check(ex), 5)


if __name__ == "__main__":
    main()
