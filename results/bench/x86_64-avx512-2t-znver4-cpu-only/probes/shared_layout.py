"""Section 48 of results/performance.md: every operand in one transposed layout, out included.

For each op x dtype x gradient kind at 2^n elements, in interleaved rounds in one process: the
contiguous case (this host's tables), the same values with every operand (and out) a transposed
view of (n/64, 64) memory, as the plan now runs it (Layout.CONTIGUOUS: the flat loops and the
contiguous tables), the same call forced through the strided walk with the space's default config
(what the plan ran before: Layout.STRIDED, no table entry), and PyTorch's eager backward on the
transposed views. Medians (us) and each one's per-round ratio over the contiguous case. The three
of ours are checked bitwise equal first. Not part of the package: run by hand, as

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/shared_layout.py 22 7
"""

from __future__ import annotations

import sys

import torch
from _rounds import every_case, print_ratios

from kernels import backends


def main() -> None:
    be = backends.get("cpu")
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    for case in every_case(n):
        dtype = case.dtype
        g, x, t = case.inputs("cpu")
        flat = case.phase_one(g, x, t, case.out_like(x), "cpu")

        # The same values in the same memory, seen as (64, n/64) transposed views.
        tv = [v.reshape(n // 64, 64).t() if v.dim() else v for v in (g, x, t)]
        out = torch.empty(n // 64, 64, dtype=dtype).t()
        shared = case.phase_one(*tv, out, "cpu")
        walk = {"variant": "strided", "tile": 4096, "cores": shared.space.default.cores}
        strided = case.phase_one(*tv, torch.empty_like(out), "cpu", config=walk)
        vendor = case.baseline()
        for e in (flat, shared, strided):
            be.launch(e)
        bits = torch.int16 if dtype.itemsize == 2 else torch.int32
        assert torch.equal(shared.out.contiguous().view(bits), strided.out.contiguous().view(bits))
        assert torch.equal(shared.out.t().reshape(n).view(bits), flat.out.view(bits))  # memory order = flat order
        names = [
            f"contiguous {flat.config.short()}",
            f"shared layout {shared.config.short()}",
            f"strided walk {strided.config.short()}",
            "torch eager, shared layout",
        ]
        runs = [
            lambda _, e=flat: be.launch(e),
            lambda _, e=shared: be.launch(e),
            lambda _, e=strided: be.launch(e),
            lambda _, tv=tv, f=vendor: f(*tv),
        ]
        print_ratios(case.label() + f" ({shared.geometry.layout.value})", names, runs, rounds)


if __name__ == "__main__":
    main()
