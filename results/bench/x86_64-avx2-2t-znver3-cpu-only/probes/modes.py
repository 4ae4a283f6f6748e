"""What the small-call modes of this host are made of (performance.md sections 75-76): batches of
``dispatch.run`` (l1 float32 0-d at 2^10, one thread), of a pure-Python loop and of a numpy call,
one after the other, each batch with the share of its run the process waited for a CPU
(kernels.timing.cpu_wait) and the host's steal time (/proc/stat: a vCPU runnable while the
hypervisor ran something else). If the Python loop slows with dispatch.run, the mode is the host's
speed, not the library's path; if the wait or the steal rises with it, the process was descheduled.
Run from a checkout: ``PYTHONPATH=. python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/modes.py [seconds]``"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import numpy as np
import torch

from kernels import dispatch, timing
from kernels.modes import Reduction
from kernels.ops import l1

N = 1 << 10


def steal_ticks() -> int:
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8])  # cpu user nice system idle iowait irq softirq steal


def per_call_us(f: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - start) / calls * 1e6


def pyloop() -> int:
    s = 0
    for i in range(200):
        s += i
    return s


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 30.0
    x, t, g, out = torch.randn(N), torch.randn(N), torch.tensor(0.5), torch.empty(N)
    _, ex = l1.get_workspace_size(g, x, t, Reduction.MEAN, out, backend="cpu")
    a, b = np.random.rand(N).astype(np.float32), np.empty(N, np.float32)
    runs = {
        "dispatch.run": (lambda: dispatch.run(ex), 500),
        "python loop": (pyloop, 500),
        "numpy copyto": (lambda: np.copyto(b, a), 2000),
    }
    for f, n in runs.values():
        per_call_us(f, n)
    print("batch  " + "  ".join(f"{k:>14s}" for k in runs) + "  cpu_wait  steal/s")
    rows: list[list[float]] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sched, steal, t0 = timing.sched_times(), steal_ticks(), time.perf_counter()
        us = [per_call_us(f, n) for f, n in runs.values()]
        wall = time.perf_counter() - t0
        wait = timing.cpu_wait(sched, timing.sched_times()) or 0.0
        stolen = (steal_ticks() - steal) / wall
        rows.append([*us, wait, stolen])
        print(f"{len(rows):5d}  " + "  ".join(f"{v:14.2f}" for v in us) + f"  {wait:8.1%}  {stolen:7.1f}")
    cols = list(zip(*rows, strict=True))
    print("median " + "  ".join(f"{statistics.median(c):14.2f}" for c in cols[: len(runs)]))
    run, loop = cols[0], cols[1]
    ratio = [r / p for r, p in zip(run, loop, strict=True)]
    med = statistics.median(ratio)
    print(f"dispatch.run / python loop: median {med:.2f}, min {min(ratio):.2f}, max {max(ratio):.2f}")


if __name__ == "__main__":
    main()
