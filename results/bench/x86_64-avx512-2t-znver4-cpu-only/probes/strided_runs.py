"""Section 49 of results/performance.md: the strided walk built once per kind of innermost run
(cpu_loops.StridedRun) against the one build holding all three loops that it replaced.

For each op x dtype x gradient kind at 2^n elements, in interleaved rounds in one process: the
contiguous case (this host's tables), the report's broadcast case (target one row over 64 rows) and
a 1-d walk (every operand a (64, n/64) transposed view, forced through the strided walk, as
section 48's probe did), each with today's loops and with the loops at OLD (loaded from git beside
today's, as tuner.restamp does; the same planner, configs and tensors). Medians (us) and each one's
per-round ratio over the contiguous case. Old and new outputs are checked bitwise equal first.
With ``short``: runs of 16, 64 and 256 elements instead (a row of target broadcast over 2^n / inner
rows, a 0-d gradient), old against new. Not part of the package: run by hand, as

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/strided_runs.py 22 7 [short]
"""

from __future__ import annotations

import dataclasses
import sys

import torch
from _rounds import backend_at, every_case, print_ratios

from kernels import backends
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout

OLD = "1a083f0"  # the last commit with the one build


def short_runs(n: int, rounds: int, old: CpuBackend, new: CpuBackend) -> None:
    """Runs of ``inner`` elements: the per-run costs a build per kind could add."""
    for inner in (16, 64, 256):
        for op, log in ((Op.MSE, False), (Op.KL_DIV, True)):
            for dtype in (torch.float32, torch.float16):
                case = Case(op, dtype, (n,), Reduction.MEAN, log_target=log)
                g, x, t = case.inputs("cpu")
                x, t = x.reshape(n // inner, inner), t[:inner].expand(n // inner, inner)
                ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
                bits = torch.int16 if dtype.itemsize == 2 else torch.int32
                new.launch(ex)
                mine = ex.out.clone()
                old.launch(ex)
                assert torch.equal(mine.view(bits), ex.out.view(bits)), case.label()
                names = [f"one build ({OLD}) {ex.config.short()}", "a build per run kind"]
                runs = [lambda _, b=b, e=ex: b.launch(e) for b in (old, new)]
                print_ratios(f"{case.label()} as rows of {inner}", names, runs, rounds)


def main() -> None:
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    old = backend_at(OLD)
    new = backends.get("cpu")
    if sys.argv[3:] == ["short"]:
        short_runs(n, rounds, old, new)
        return
    for case in every_case(n):
        dtype = case.dtype
        g, x, t = case.inputs("cpu")
        flat = case.phase_one(g, x, t, case.out_like(x), "cpu")
        bcast_case = dataclasses.replace(case, layout=InputLayout.BROADCAST)
        bg, bx, bt = bcast_case.inputs("cpu")
        bcast = bcast_case.phase_one(bg, bx, bt, bcast_case.out_like(bx), "cpu")
        tv = [v.reshape(n // 64, 64).t() if v.dim() else v for v in (g, x, t)]
        out = torch.empty(n // 64, 64, dtype=dtype).t()
        walk = {"variant": "strided", "tile": 4096, "cores": bcast.config.cores}
        one_d = case.phase_one(*tv, out, "cpu", config=walk)
        new.launch(flat)
        bits = torch.int16 if dtype.itemsize == 2 else torch.int32
        for ex in (bcast, one_d):
            new.launch(ex)
            mine = ex.out.clone()
            old.launch(ex)
            assert torch.equal(mine.view(bits), ex.out.view(bits)), case.label()
        names = [
            f"contiguous {flat.config.short()}",
            f"broadcast {bcast.config.short()}, one build ({OLD})",
            "broadcast, a build per run kind",
            f"1-d strided walk {one_d.config.short()}, one build ({OLD})",
            "1-d strided walk, a build per run kind",
        ]
        pairs = ((new, flat), (old, bcast), (new, bcast), (old, one_d), (new, one_d))
        runs = [lambda _, b=b, e=e: b.launch(e) for b, e in pairs]
        print_ratios(case.label(), names, runs, rounds)


if __name__ == "__main__":
    main()
