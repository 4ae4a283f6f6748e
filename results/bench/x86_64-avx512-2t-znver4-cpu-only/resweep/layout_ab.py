"""One layout row at two configs, in interleaved rounds in one process beside its contiguous partner
(the report's goal: the row over it), run by run. Outputs bit for bit first. Run from the repository
root (results/performance.md, section 112):

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/resweep/layout_ab.py mse float16 mean 22 9 \\
        'variant=strided,tile=4096,cores=2,stream=1,transpose_row=32,defer_out=1' \\
        'variant=strided,tile=4096,cores=2,stream=1,transpose_row=32'

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
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout


def _config(text: str) -> Tiling:
    fields = dict(kv.split("=") for kv in text.split(","))
    return Tiling.from_dict({k: (v if k == "variant" else int(v)) for k, v in fields.items()})


def main() -> None:
    op, dtype, red, k, rounds = (
        sys.argv[1],
        getattr(torch, sys.argv[2]),
        sys.argv[3],
        int(sys.argv[4]),
        int(sys.argv[5]),
    )
    log = op == "kl_div-log"
    case = Case(
        Op.KL_DIV if log else Op(op),
        dtype,
        (1 << k,),
        Reduction[red.upper()],
        log_target=log,
        layout=InputLayout.TRANSPOSED,
    )
    configs = [_config(c) for c in sys.argv[6:8]]
    g, x, t = case.inputs("cpu")
    runs, outs = [], []
    for config in configs:
        out = case.out_like(x)
        ex = dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config)
        BACKEND.launch(ex)
        outs.append(out)
        runs.append(lambda _, ex=ex: BACKEND.launch(ex))
    view = torch.int32 if dtype is torch.float32 else torch.int16
    assert torch.equal(outs[0].view(view), outs[1].view(view)), "the bits differ"
    partner = dataclasses.replace(case, layout=InputLayout.CONTIGUOUS)
    pg, px, pt = partner.inputs("cpu")
    pex = partner.phase_one(pg, px, pt, partner.out_like(px), "cpu")
    runs.append(lambda _, ex=pex: BACKEND.launch(ex))
    *rows, contiguous = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    print(f"# {case.label()}, {rounds} interleaved rounds, run by run; partner {contiguous.median_s * 1e6:.1f} us")
    for config, r in zip(configs, rows, strict=True):
        over = [m / c for m, c in zip(r.medians, contiguous.medians, strict=True)]
        us = [m * 1e6 for m in r.medians]
        print(
            f"{config.short():52s} {r.median_s * 1e6:8.1f} ({spread(us, '.0f')})"
            f"  x partner {statistics.median(over):.2f} ({spread(over, '.2f')})"
        )
    ratios = [b / a for a, b in zip(rows[0].medians, rows[1].medians, strict=True)]
    print(f"second/first {statistics.median(ratios):.3f} ({spread(ratios, '.3f')})")


if __name__ == "__main__":
    main()
