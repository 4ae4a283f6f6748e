"""Section 62 of results/performance.md: on a host with 16 vector registers (no AVX-512F) the
contiguous loops of KL log_target call each tile's element loop as a function of its own
(cpu_loops.TILES_APART, make_cpu_kernels' ``apart``), so that the exp's constants stay in registers
across its vector loop. Same config and bits either way.

For each dtype, size and gradient kind (none: full, mean: 0-d), in interleaved rounds in one
process: the call with the loops inlined as before (``inline``: a CpuBackend over a copy of
cpu_loops whose make_cpu_kernels takes apart=False), with the tiles apart, and the size-matched
torch copy (the report's roofline); medians (us), each side's roofline % and the per-round ratio
apart / inline. Both outputs are compared bit for bit first. The table's config where it has one,
else the space default (the report's tuned config). Not part of the package: run by hand, as

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/apart.py 5 16 20 24
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
from tuner.problems import Case


def _loops(apart: bool) -> ModuleType:
    module = ModuleType(f"cpu_loops_apart_{apart}")
    vars(module).update(vars(cpu_loops))
    module.make_cpu_kernels = functools.partial(cpu_loops.make_cpu_kernels, apart=apart)  # type: ignore[attr-defined]
    return module


BACKENDS = (CpuBackend(_loops(False)), CpuBackend(_loops(True)))


def row(dtype: torch.dtype, n: int, reduction: Reduction, rounds: int) -> None:
    case = Case(Op.KL_DIV, dtype, (n,), reduction, log_target=True)
    g, x, t = case.inputs("cpu")
    outs = [case.out_like(x), case.out_like(x)]
    exs = [case.phase_one(g, x, t, out, "cpu") for out in outs]
    for backend, ex in zip(BACKENDS, exs, strict=True):
        backend.launch(ex)
    view = torch.int32 if dtype is torch.float32 else torch.int16
    assert torch.equal(outs[0].view(view), outs[1].view(view)), "the two builds' bits differ"
    nbytes = timing.bytes_moved(case.read_tensors(g, x, t), outs[0])
    copy, copy_bytes = timing.copy_probe("cpu", nbytes)
    runs = [lambda _, b=b, e=e: b.launch(e) for b, e in zip(BACKENDS, exs, strict=True)] + [copy]
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    ratios = [a / b for a, b in zip(measured[1].medians, measured[0].medians, strict=True)]

    def roofline(i: int) -> float:
        rounds_i = zip(measured[i].medians, measured[2].medians, strict=True)
        return 100 * statistics.median((nbytes / k) / (copy_bytes / c) for k, c in rounds_i)

    grad = "0-d" if reduction is Reduction.MEAN else "full"
    print(
        f"| {str(dtype).removeprefix('torch.')} | 2^{n.bit_length() - 1} | {grad} | {exs[1].config.short()} "
        f"| {measured[0].median_s * 1e6:.0f} | {measured[1].median_s * 1e6:.0f} "
        f"| {roofline(0):.0f}% | {roofline(1):.0f}% "
        f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |",
        flush=True,
    )


def main() -> None:
    rounds = int(sys.argv[1])
    sizes = [int(a) for a in sys.argv[2:]] or [16, 20, 24]
    print(f"# TILES_APART={cpu_loops.TILES_APART} on this host, {rounds} rounds")
    head = "| dtype | n | grad | config | inline us | apart us | inline roofline | apart roofline |"
    print(head + " apart / inline (min-max) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        for reduction in (Reduction.NONE, Reduction.MEAN):
            for k in sizes:
                row(dtype, 1 << k, reduction, rounds)


if __name__ == "__main__":
    main()
