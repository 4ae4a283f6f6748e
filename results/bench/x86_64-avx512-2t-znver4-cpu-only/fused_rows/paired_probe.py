"""A probe: the Zen 5's paired fused walk (Tiling.paired, cpu_loops.PAIRED: row i of both stacked
16 x 16 blocks in one 512-bit register, each column pair stored as one whole line; section 94) on
the Zen 4, which is offered neither it nor the fused walk for these rows. For each 16-bit mse row and
kl_div full row (the forms whose fused walk converts rows, the only ones paired) transposed at 2^22,
in interleaved rounds in one process: the chip table's config, the fused walk with 32-byte rows, and
the paired fused walk, streamed and not; each over the row's contiguous partner, round by round,
every output's bits compared with the shipped config's. Run from the repository root with both
built (results/performance.md, section 113):

    LOSSTUNE_CPU_FUSED=1 LOSSTUNE_CPU_PAIRED=1 \
        python results/bench/x86_64-avx512-2t-znver4-cpu-only/fused_rows/paired_probe.py 7

The shipped configs are read from the chip table's file, as fused_probe.py reads them. Not part of
the package.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import warnings
from pathlib import Path

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import BACKEND
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout

TABLE = Path(__file__).parents[4] / "kernels" / "configs" / "cpu" / "x86_64-avx512-znver4-2t.json"
ROWS = (
    (Op.MSE, torch.float16, Reduction.NONE),
    (Op.MSE, torch.float16, Reduction.MEAN),
    (Op.MSE, torch.bfloat16, Reduction.NONE),
    (Op.MSE, torch.bfloat16, Reduction.MEAN),
    (Op.KL_DIV, torch.float16, Reduction.NONE),
    (Op.KL_DIV, torch.bfloat16, Reduction.NONE),
)


def main() -> None:
    assert cpu_loops.PAIRED, "run with LOSSTUNE_CPU_FUSED=1 LOSSTUNE_CPU_PAIRED=1"
    warnings.simplefilter("ignore")  # the lookups' guesses for the partners' spaces: not this probe's
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    entries = {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(TABLE.read_text())["entries"]}
    half = cpu_loops.LINE // 2
    print(f"# {rounds} interleaved rounds, run by run; median us; x the contiguous partner: median (min-max)")
    for op, dtype, red in ROWS:
        case = Case(op, dtype, (1 << 22,), red, layout=InputLayout.TRANSPOSED)
        shipped = entries[case.label()]
        plain = dataclasses.replace(shipped, defer_out=False, transpose_in=False, transpose_row=half, fused=True)
        configs = {
            "shipped": shipped,
            "fused stream": dataclasses.replace(plain, stream=True),
            "paired stream": dataclasses.replace(plain, stream=True, paired=True),
            "paired plain": dataclasses.replace(plain, stream=False, paired=True),
        }
        g, x, t = case.inputs("cpu")
        runs, outs = [], []
        for config in configs.values():
            out = case.out_like(x)
            ex = dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config)
            BACKEND.launch(ex)
            outs.append(out)
            runs.append(lambda _, ex=ex: BACKEND.launch(ex))
        same = all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs)
        partner = dataclasses.replace(case, layout=InputLayout.CONTIGUOUS)
        pg, px, pt = partner.inputs("cpu")
        pex = partner.phase_one(pg, px, pt, partner.out_like(px), "cpu")
        runs.append(lambda _, ex=pex: BACKEND.launch(ex))
        *rows, contiguous = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
        parts = [f"{case.label():40s} bits {'equal' if same else 'DIFFER'}; partner {contiguous.median_s * 1e6:.0f}"]
        for name, config, r in zip(configs, configs.values(), rows, strict=True):
            over = [m / c for m, c in zip(r.medians, contiguous.medians, strict=True)]
            parts.append(
                f"  {name:13s} [{config.short()}] {r.median_s * 1e6:7.1f}"
                f" x {statistics.median(over):.2f} ({spread(over, '.2f')})"
            )
        print("\n".join(parts), flush=True)


if __name__ == "__main__":
    main()
