"""The fused walk of every form (mse's scaled difference, KL's negated scale; 0-d and full
gradients; float32, float16, bfloat16) against the walk each transposed row's table entry runs
(results/performance.md, section 93).

For the transposed rows at 2^22 (the report's layout: every input a ``(65536 x 64).t()`` view, out
contiguous), in interleaved rounds in one process: the config the table gave at ``BEFORE`` (read
by ``head_configs.json``, written by a checkout of that commit, where its entries were fresh), the
fused walk with each register row and kind of stores, and the contiguous partner at the config
the table gave it at ``BEFORE``. Outputs bit for bit first. Run from the repository root:

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/fused_forms.py CONFIGS.json 7 [op ...]

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
BACKEND = CpuBackend()


def main() -> None:
    configs = {k: Tiling.from_dict(v) for k, v in json.loads(open(sys.argv[1]).read()).items()}
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    ops = sys.argv[3:] or ["mse", "kl_div"]
    assert cpu_loops.FUSED, "the fused walk is offered on the Zen 5, or with LOSSTUNE_CPU_FUSED=1"
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; over the contiguous partner, median (min-max)")
    for op in ops:
        for red in (Reduction.MEAN, Reduction.NONE):
            for dtype in (torch.float16, torch.bfloat16, torch.float32):
                case = Case(Op(op), dtype, (N,), red, layout=InputLayout.TRANSPOSED)
                flat = Case(case.op, case.dtype, case.shape, case.reduction)
                shipped = configs[case.label()]
                variants = [("table: " + shipped.short(), shipped)]
                for row in cpu_loops.TRANSPOSE_ROWS:
                    for stream in (False, True):
                        fused = dataclasses.replace(shipped, fused=True, transpose_row=row, stream=stream)
                        fused = dataclasses.replace(fused, defer_out=False, transpose_in=False)
                        variants.append(("fused: " + fused.short(), fused))
                g, x, t = case.inputs("cpu")
                outs, exs = [], []
                for _, config in variants:
                    out = case.out_like(x)
                    ex = case.phase_one(g, x, t, out, "cpu", config=config)
                    BACKEND.launch(ex)
                    outs.append(out)
                    exs.append(ex)
                bits = torch.int16 if dtype.itemsize == 2 else torch.int32
                assert all(torch.equal(outs[0].view(bits), o.view(bits)) for o in outs[1:]), "the configs' bits differ"
                fg, fx, ft = flat.inputs("cpu")
                fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu", config=configs[flat.label()])
                runs = [(lambda _, ex=ex: BACKEND.launch(ex)) for ex in exs]
                runs.append(lambda _, ex=fex: BACKEND.launch(ex))
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
