"""KL log_target float16 0-d at 2^k (default 22): the deferred transposed walk (the chip table's
config: strided, tile 4096, 2 cores, 32-byte rows, deferred, streamed unless STREAM=0) against its
contiguous partner (scalar_grad, tile 256, 2 cores, prefetch 2), in interleaved rounds (ROUNDS,
default 9); prints both medians and the walk over the partner, round by round: median (min-max).
The configs are given, not looked up, so a build with the prototype applied (prototype.diff, whose
edit of cpu_loops.py moves the kernel hash) runs the same configs. With the prototype,
LOSSTUNE_PROBE's bits pick what the walk leaves out or changes, read when the loops are built
unless said: 1 pass (b)'s transposes (every tile, its ragged elements' copy too), 2 the held rows'
stores into out (whole tiles; the last tile's rows and a ragged tile's are still stored), 4 pass
(a), the formula (whole tiles), 8 a held line stored after each 32 elements of pass (a) instead of
a row after each 128 (streamed stores only: with STREAM=0 nothing changes), 16 pass (b) in paired
registers (row i of both stacked blocks in one zmm; read when cpu_loops is imported, so every
two-block transpose of 32-byte rows in every walk, of which this row runs the deferred one), 32
pass (b) run between pass (a)'s pieces a group of 16 pieces behind, into a third buffer swapped
with held at the tile's end. Bits 1, 2 and 4 give wrong outputs (a breakdown of the time only);
8, 16 and 32 the same bits (bits.py). The prototype's build allocates the third buffer whatever
the bits (unused without 32). Run as below (results/performance.md, section 111):

    cd results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/walk_parts
    LOSSTUNE_PROBE=0 PYTHONPATH=../../../../.. python parts.py 22

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import warnings

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 22
    stream = os.environ.get("STREAM", "1") == "1"
    backend = CpuBackend()
    configs = {
        InputLayout.CONTIGUOUS: Tiling(tile=256, cores=2, variant=Variant.SCALAR_GRAD, prefetch=2),
        InputLayout.TRANSPOSED: Tiling(
            tile=4096, cores=2, variant=Variant.STRIDED, stream=stream, transpose_row=32, defer_out=True
        ),
    }
    runs = []
    for layout, config in configs.items():
        case = Case(Op.KL_DIV, torch.float16, (1 << k,), Reduction.MEAN, log_target=True, layout=layout)
        g, x, t = case.inputs("cpu")
        ex = dataclasses.replace(case.phase_one(g, x, t, case.out_like(x), "cpu"), config=config)
        backend.launch(ex)
        runs.append(lambda _, ex=ex: backend.launch(ex))
    contiguous, walk = timing.interleaved(runs, rounds=int(os.environ.get("ROUNDS", "9")), min_time_s=0.15)
    ratios = [a / b for a, b in zip(walk.medians, contiguous.medians, strict=True)]
    print(
        f"probe={os.environ.get('LOSSTUNE_PROBE', '0')} contiguous {contiguous.median_s * 1e6:.1f} "
        f"transposed {walk.median_s * 1e6:.1f} ratio {statistics.median(ratios):.3f} "
        f"({min(ratios):.3f}-{max(ratios):.3f})",
        flush=True,
    )


if __name__ == "__main__":
    main()
