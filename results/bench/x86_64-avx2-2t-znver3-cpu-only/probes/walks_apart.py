"""Section 63 of results/performance.md: the strided walk's unit-stride runs and the transposed
walk's pass (a) apart (cpu_loops.make_cpu_kernels' ``apart``: a call of a function of their own per
run or tile, through the checked twin where the formula has one), as section 62 put the contiguous
loops' tiles. Same config and bits either way.

For each dtype and gradient kind (none: full, mean: 0-d) of KL log_target at 2^22 (the report's
layout size), in interleaved rounds in one process: the transposed and broadcast calls with the
walks inlined as before (``inline``: a CpuBackend over a copy of cpu_loops whose make_cpu_kernels
takes apart=False; its contiguous loops are the formula's own), with them apart, and the
contiguous call of the shipped build (apart here): medians (us) and each walk's ratio over the
contiguous call per round, median (min-max), as the report's layout goals read it. Outputs are
compared bit for bit first. The table's config where it has one, else the space default. Not part
of the package: run by hand, as

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/walks_apart.py 5
"""

from __future__ import annotations

import functools
import statistics
import sys
from types import ModuleType

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout


def _loops(apart: bool) -> ModuleType:
    module = ModuleType(f"cpu_loops_apart_{apart}")
    vars(module).update(vars(cpu_loops))
    module.make_cpu_kernels = functools.partial(cpu_loops.make_cpu_kernels, apart=apart)  # type: ignore[attr-defined]
    return module


INLINE, APART = CpuBackend(_loops(False)), CpuBackend(_loops(True))
N = 1 << 22


def row(dtype: torch.dtype, reduction: Reduction, layout: InputLayout, rounds: int) -> None:
    flat = Case(Op.KL_DIV, dtype, (N,), reduction, log_target=True)
    case = Case(Op.KL_DIV, dtype, (N,), reduction, log_target=True, layout=layout)
    g, x, t = case.inputs("cpu")
    outs = [case.out_like(x), case.out_like(x)]
    exs = [case.phase_one(g, x, t, out, "cpu") for out in outs]
    for backend, ex in zip((INLINE, APART), exs, strict=True):
        backend.launch(ex)
    view = torch.int32 if dtype is torch.float32 else torch.int16
    assert torch.equal(outs[0].view(view), outs[1].view(view)), "the two builds' bits differ"
    fg, fx, ft = flat.inputs("cpu")
    fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu")
    runs = [
        lambda _: INLINE.launch(exs[0]),
        lambda _: APART.launch(exs[1]),
        lambda _: APART.launch(fex),
    ]
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)

    def over_flat(i: int) -> str:
        r = [a / c for a, c in zip(measured[i].medians, measured[2].medians, strict=True)]
        return f"{statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f})"

    grad = "0-d" if reduction is Reduction.MEAN else "full"
    print(
        f"| {str(dtype).removeprefix('torch.')} | {layout.value} | {grad} | {exs[1].config.short()} "
        f"| {measured[0].median_s * 1e6:.0f} | {measured[1].median_s * 1e6:.0f} "
        f"| {measured[2].median_s * 1e6:.0f} | {over_flat(0)} | {over_flat(1)} |",
        flush=True,
    )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    print(f"# TILES_APART={cpu_loops.TILES_APART} on this host, 2^22, {rounds} rounds")
    print("| dtype | layout | grad | config | inline us | apart us | contiguous us | inline / contiguous |", end="")
    print(" apart / contiguous |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for reduction in (Reduction.NONE, Reduction.MEAN):
            for layout in (InputLayout.TRANSPOSED, InputLayout.BROADCAST):
                row(dtype, reduction, layout, rounds)


if __name__ == "__main__":
    main()
