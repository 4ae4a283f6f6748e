"""Yardsticks for the KL log_target float16 0-d transposed row at 2^k (default 22), each looked-up
config, in 9 interleaved rounds, over KL log_target's contiguous loop (per round, median): kl_div
and kl_div-log, contiguous and transposed (the formula without and with the exp; the transposed
walks' configs are the same, the contiguous loops' each its own); torch's copy of the transposed
target into a contiguous tensor (a transpose alone) and its contiguous copy_ of as many float16
elements. ``--table``: instead, the contiguous KL log_target loop against the table walk
(Variant.TABLE: one gather a 16 targets, section 22) at tile 4096, ordinary and streamed, and at
tile 1024, ordinary. Run from the repository root (results/performance.md, section 111):

    PYTHONPATH=. python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/walk_parts/yardsticks.py 22

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import warnings
from collections.abc import Callable

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    torch.set_num_threads(2)
    sizes = [int(a) for a in sys.argv[1:] if not a.startswith("--")] or [22]
    k = sizes[0]
    backend = CpuBackend()
    runs: list[Callable[[int], object]] = []
    labels: list[str] = []
    base = 0

    def launch(case: Case, config: Tiling | None = None) -> None:
        g, x, t = case.inputs("cpu")
        ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
        if config is not None:
            ex = dataclasses.replace(ex, config=config)
        backend.launch(ex)
        labels.append(f"{case.label()} [{ex.config.short()}]")
        runs.append(lambda _, ex=ex: backend.launch(ex))

    if "--table" in sys.argv:
        case = Case(Op.KL_DIV, torch.float16, (1 << k,), Reduction.MEAN, log_target=True)
        launch(case, Tiling(tile=256, cores=2, variant=Variant.SCALAR_GRAD, prefetch=2))
        for tile, stream in ((4096, False), (4096, True), (1024, False)):
            launch(case, Tiling(tile=tile, cores=2, variant=Variant.TABLE, stream=stream))
    else:
        for log_target in (False, True):
            for layout in (InputLayout.CONTIGUOUS, InputLayout.TRANSPOSED):
                if log_target and layout is InputLayout.CONTIGUOUS:
                    base = len(runs)
                launch(Case(Op.KL_DIV, torch.float16, (1 << k,), Reduction.MEAN, log_target=log_target, layout=layout))
        view = Case(Op.KL_DIV, torch.float16, (1 << k,), Reduction.MEAN, layout=InputLayout.TRANSPOSED).inputs("cpu")[2]
        dst = torch.empty(view.shape, dtype=view.dtype)
        src, out = torch.empty(1 << k, dtype=torch.float16), torch.empty(1 << k, dtype=torch.float16)
        labels += ["torch: the transposed target copied contiguous", "torch: copy_ of as many float16 elements"]
        runs += [lambda _: dst.copy_(view), lambda _: out.copy_(src)]
    results = timing.interleaved(runs, rounds=9, min_time_s=0.15)
    for label, result in zip(labels, results, strict=True):
        ratios = [a / b for a, b in zip(result.medians, results[base].medians, strict=True)]
        print(f"{label:90s} {result.median_s * 1e6:8.1f} us  {statistics.median(ratios):.3f}", flush=True)


if __name__ == "__main__":
    main()
