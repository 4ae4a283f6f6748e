"""The fused walk with paired half rows (Tiling.paired: two stacked 16 x 16 blocks in one 512-bit
register a row pair, each column a whole line of out) against the fused walk's half rows and the
table's config (results/performance.md, section 94).

For the transposed rows at 2^22 (the report's layout: every input a ``(65536 x 64).t()`` view, out
contiguous), in interleaved rounds in one process: the table's config (``CONFIGS.json``, written
from a checkout at the commit measured), the fused walk with half rows, plain and paired (16-bit
outs), each with ordinary and streamed stores, and the contiguous partner at its table config. Outputs bit for
bit first. Run from the repository root:

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/paired_rows.py CONFIGS.json 7 [op ...] [dtype ...]

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout

N = 1 << 22
HALF = cpu_loops.LINE // 2


def main() -> None:
    configs = {k: Tiling.from_dict(v) for k, v in json.loads(open(sys.argv[1]).read()).items()}
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    names = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}
    ops = [a for a in sys.argv[3:] if a not in names] or ["kl_div", "mse"]
    dtypes = [names[a] for a in sys.argv[3:] if a in names] or list(names.values())
    backend = CpuBackend()
    assert cpu_loops.PAIRED, "paired half rows are offered on the Zen 5, or with LOSSTUNE_CPU_PAIRED=1"
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; over the contiguous partner, median (min-max)")
    for op in ops:
        for red in (Reduction.MEAN, Reduction.NONE):
            for dtype in dtypes:
                case = Case(Op(op), dtype, (N,), red, layout=InputLayout.TRANSPOSED)
                flat = Case(case.op, case.dtype, case.shape, case.reduction)
                shipped = configs[case.label()]
                variants = [("table: " + shipped.short(), shipped)]
                for paired in (False, True) if dtype.itemsize == 2 else (False,):  # offered for 16-bit outs
                    for stream in (False, True):
                        fused = dataclasses.replace(shipped, fused=True, transpose_row=HALF, stream=stream)
                        fused = dataclasses.replace(fused, defer_out=False, transpose_in=False, paired=paired)
                        variants.append(("fused: " + fused.short(), fused))
                g, x, t = case.inputs("cpu")
                outs, runs = [], []
                for _, config in variants:
                    out = case.out_like(x)
                    ex = case.phase_one(g, x, t, out, "cpu", config=config)
                    backend.launch(ex)
                    outs.append(out)
                    runs.append(lambda _, ex=ex: backend.launch(ex))
                bits = torch.int16 if dtype.itemsize == 2 else torch.int32
                assert all(torch.equal(outs[0].view(bits), o.view(bits)) for o in outs[1:]), "the configs' bits differ"
                fg, fx, ft = flat.inputs("cpu")
                fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu", config=configs[flat.label()])
                runs.append(lambda _, ex=fex: backend.launch(ex))
                measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
                print(f"## {case.label()}  partner {measured[-1].median_s * 1e6:.0f} us", flush=True)
                for (name, _), r in zip(variants, measured, strict=False):
                    ratios = [a / b for a, b in zip(r.medians, measured[-1].medians, strict=True)]
                    print(
                        f"  {name:72s} {r.median_s * 1e6:7.0f} us  {statistics.median(ratios):.2f} "
                        f"({spread(ratios, '.2f')})",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
