"""KL's bfloat16 0-d loop at 2^24, five configs timed two ways, three times: alone (timing.measure,
launch after launch on one out, the sweep's trial before bd45c9b) and launch by launch with the
size-matched copy between the launches (timing.interleaved with timing.copy_probe's run, the
regime bench --report's roofline rows time). Run from the repository root at 5e156e1's tree
(results/performance.md, section 108):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/roofline_16bit/regime_probe.py 24

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import sys
import warnings

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.problems import Case

SG = Variant.SCALAR_GRAD
CONFIGS = [
    Tiling(tile=4096, cores=2, variant=SG),
    Tiling(tile=256, cores=2, variant=SG, prefetch=1),
    Tiling(tile=1024, cores=2, variant=SG, stream=True),
    Tiling(tile=4096, cores=2, variant=SG, stream=True),
    Tiling(tile=1024, cores=2, variant=SG, stream=True, prefetch=2),
]


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    backend = CpuBackend()
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 24
    for log_target in (False, True):
        case = Case(Op.KL_DIV, torch.bfloat16, (1 << k,), Reduction.MEAN, log_target=log_target)
        g, x, t = case.inputs("cpu")
        out = case.out_like(x)
        exs = [dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=c) for c in CONFIGS]
        for ex in exs:
            backend.launch(ex)
        copy, _ = timing.copy_probe("cpu", timing.bytes_moved(case.read_tensors(g, x, t), out))
        launch = timing.Grain.LAUNCH
        for rep in range(3):
            runs = [lambda _, ex=ex: backend.launch(ex) for ex in exs]
            alone = [timing.measure(run, "cpu", min_time_s=0.05).median_s for run in runs]
            between = [
                timing.interleaved([run, copy], rounds=1, min_time_s=0.05, grain=launch)[0].median_s for run in runs
            ]
            for label, times in (("alone ", alone), ("w/copy", between)):
                cells = " ".join(
                    f"{c.short().replace('scalar_grad ', '')}:{s * 1e6:.0f}"
                    for c, s in zip(CONFIGS, times, strict=True)
                )
                print(f"log={log_target} rep{rep} {label} {cells}", flush=True)


if __name__ == "__main__":
    main()
