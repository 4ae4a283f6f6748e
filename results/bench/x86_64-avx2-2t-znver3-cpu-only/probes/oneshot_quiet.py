"""The one-shot call and dispatch.run of l1 float32 0-d at 2^10, in batches of 200 calls, and single
calls right after a parallel torch copy (performance.md section 75). Run from a checkout:
``PYTHONPATH=. python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/oneshot_quiet.py``"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch

from kernels import dispatch
from kernels.modes import Reduction
from kernels.ops import l1

N = 1 << 10
BATCH = 200
ROUNDS = 20


def per_call_us(f: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        f()
    return (time.perf_counter() - start) / calls * 1e6


def main() -> None:
    x, t, g, out = torch.randn(N), torch.randn(N), torch.tensor(0.5), torch.empty(N)
    big, big2 = torch.randn(1 << 20), torch.empty(1 << 20)
    _, ex = l1.get_workspace_size(g, x, t, Reduction.MEAN, out, backend="cpu")

    def public() -> object:
        return l1.l1_loss_backward(g, x, t, Reduction.MEAN, out=out, backend="cpu")

    def run() -> None:
        dispatch.run(ex)

    res: dict[str, list[float]] = {"public": [], "public after torch copy": [], "run": [], "run after torch copy": []}
    for _ in range(ROUNDS):
        res["public"].append(per_call_us(public, BATCH))
        big2.copy_(big)  # a parallel torch op just before one call
        res["public after torch copy"].append(per_call_us(public, 1))
        res["run"].append(per_call_us(run, BATCH))
        big2.copy_(big)
        res["run after torch copy"].append(per_call_us(run, 1))
    for name, v in res.items():
        v.sort()
        print(f"{name:26s} min {v[0]:6.1f} med {statistics.median(v):6.1f} max {v[-1]:6.1f}")


if __name__ == "__main__":
    main()
