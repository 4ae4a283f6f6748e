"""KL log_target's transposed 0-d bfloat16 row at the config the Zen 4's chip table held before
section 112 (the inputs-first order) and the one its re-sweep froze under the walks' twin (the
shipped order), both through the backend as it ships (the twin on), in interleaved rounds in one
process beside the row's contiguous partner (the report's goal: the transposed row over it). Outputs
bit for bit first. Run from the repository root:

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/checked_bf16/transposed_ab.py 9 20 22

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from kernels import timing
from kernels.backends.cpu import BACKEND
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling, Variant
from tuner.goals import spread
from tuner.problems import Case, InputLayout

FROZEN = Tiling(variant=Variant.STRIDED, tile=4096, cores=2, stream=True, transpose_row=32)
CONFIGS = {"inputs-first (before)": dataclasses.replace(FROZEN, transpose_in=True), "shipped order (now)": FROZEN}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    sizes = [int(k) for k in sys.argv[2:]] or [22]
    print(f"# {rounds} interleaved rounds, run by run; median us (min-max); x the contiguous partner, round by round")
    for k in sizes:
        layout = InputLayout.TRANSPOSED
        case = Case(Op.KL_DIV, torch.bfloat16, (1 << k,), Reduction.MEAN, log_target=True, layout=layout)
        partner = dataclasses.replace(case, layout=InputLayout.CONTIGUOUS)
        runs, outs = [], []
        for config in CONFIGS.values():
            g, x, t = case.inputs("cpu")
            out = case.out_like(x)
            ex = dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config)
            BACKEND.launch(ex)
            outs.append(out)
            runs.append(lambda _, ex=ex: BACKEND.launch(ex))
        assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the bits differ"
        g, x, t = partner.inputs("cpu")
        pex = partner.phase_one(g, x, t, partner.out_like(x), "cpu")
        runs.append(lambda _, ex=pex: BACKEND.launch(ex))
        *rows, contiguous = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
        print(f"{case.label()}; partner {pex.config.short()} {contiguous.median_s * 1e6:.1f} us")
        for name, r in zip(CONFIGS, rows, strict=True):
            over = [m / c for m, c in zip(r.medians, contiguous.medians, strict=True)]
            us = [m * 1e6 for m in r.medians]
            over_text = f"{statistics.median(over):.2f} ({spread(over, '.2f')})"
            print(f"  {name:24s} {r.median_s * 1e6:8.1f} ({spread(us, '.0f')})  x partner {over_text}")
        ratios = [b / a for a, b in zip(rows[0].medians, rows[1].medians, strict=True)]
        print(f"  now/before {statistics.median(ratios):.3f} ({spread(ratios, '.3f')})", flush=True)


if __name__ == "__main__":
    main()
