"""KL's 16-bit contiguous rows with a 0-d gradient at 2^24 and 2^26 (the report's roofline rows
that sat at 72-92% of the copy, goal 80%): the table's config against the contiguous loop's
variants (scalar_grad, tile 1024 or 4096, ordinary or streamed stores, no prefetch or 2 tiles
ahead) and the size-matched torch copy, launch by launch (the report's grain for these rows) in
interleaved rounds in one process. Every config's bits are compared with the table's. Run from
the repository root (results/performance.md, section 108):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/roofline_16bit/ab.py 7 24 26

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import warnings

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case

OPS = (("kl_div", False), ("kl_div-log", True))
DTYPES = (torch.float16, torch.bfloat16)
CONFIGS = [
    Tiling(tile=tile, cores=2, variant=Variant.SCALAR_GRAD, stream=stream, prefetch=prefetch)
    for tile in (1024, 4096)
    for stream in (False, True)
    for prefetch in (0, 2)
]


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:]] or [24]
    backend = CpuBackend()
    print(f"# {rounds} interleaved rounds, launch by launch; % of the size-matched copy: median (min-max) of rounds")
    for k in sizes:
        for name, log_target in OPS:
            for dtype in DTYPES:
                case = Case(Op.KL_DIV, dtype, (1 << k,), Reduction.MEAN, log_target=log_target)
                g, x, t = case.inputs("cpu")
                table = case.phase_one(g, x, t, case.out_like(x), "cpu")
                exs = [table] + [
                    dataclasses.replace(case.phase_one(g, x, t, case.out_like(x), "cpu"), config=c) for c in CONFIGS
                ]
                for ex in exs:
                    backend.launch(ex)
                same = all(torch.equal(exs[0].out.view(torch.int16), ex.out.view(torch.int16)) for ex in exs)
                nbytes = timing.bytes_moved(case.read_tensors(g, x, t), exs[0].out)
                copy, copy_bytes = timing.copy_probe("cpu", nbytes)
                runs = [lambda _, ex=ex: backend.launch(ex) for ex in exs] + [copy]
                timed = timing.interleaved(runs, rounds=rounds, min_time_s=0.1, grain=timing.Grain.LAUNCH)
                copy_t = timed[-1].medians
                print(f"{name:10s} {str(dtype)[6:]:8s} 2^{k} bits {'equal' if same else 'DIFFER'}", flush=True)
                for label, walk in zip(
                    ["table " + table.config.short()] + [c.short() for c in CONFIGS], timed[:-1], strict=True
                ):
                    pct = [100 * (nbytes / a) / (copy_bytes / c) for a, c in zip(walk.medians, copy_t, strict=True)]
                    print(
                        f"    {label:60s} {walk.median_s * 1e6:9.0f} us  {statistics.median(pct):5.1f}%"
                        f" ({spread(pct, '.0f')})",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
