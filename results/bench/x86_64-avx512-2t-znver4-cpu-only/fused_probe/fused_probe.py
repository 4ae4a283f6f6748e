"""A probe: the Zen 5's fused transposed walk (Tiling.fused, cpu_loops.FUSED: section 92) on the
Zen 4, which is not offered it. For each mse and kl_div transposed row at 2^22 (the forms the fused
walk has), in interleaved rounds in one process: the config the Zen 4's chip table ships, the fused
walk with streamed and with ordinary stores (the shipped config's tile and row, its order knobs
off), and the row's contiguous partner at its table config; each walk's time over the partner's,
round by round. Every output's bits are compared with the shipped config's. Run from the repository
root with the walk built (results/performance.md, section 112):

    LOSSTUNE_CPU_FUSED=1 python results/bench/x86_64-avx512-2t-znver4-cpu-only/fused_probe/fused_probe.py 7

Words after the rounds keep the rows whose label has them all (``kl_div mean``: kl_div's 0-d rows).

The shipped configs are read from the chip table's file, not looked up: with the fused walk offered,
the transposed spaces' hashes change and the lookup would guess. Not part of the package.
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


def main() -> None:
    assert cpu_loops.FUSED, "run with LOSSTUNE_CPU_FUSED=1"
    warnings.simplefilter("ignore")  # the lookups' guesses for the partners' spaces: not this probe's
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    entries = {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(TABLE.read_text())["entries"]}
    print(f"# {rounds} interleaved rounds, run by run; median us; x the contiguous partner: median (min-max)")
    for op in (Op.MSE, Op.KL_DIV):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for red in (Reduction.NONE, Reduction.MEAN):
                case = Case(op, dtype, (1 << 22,), red, layout=InputLayout.TRANSPOSED)
                if not all(word in case.label() for word in sys.argv[2:]):
                    continue
                shipped = entries[case.label()]
                plain = dataclasses.replace(shipped, defer_out=False, transpose_in=False, paired=False)
                configs = {
                    "shipped": shipped,
                    "fused stream": dataclasses.replace(plain, fused=True, stream=True),
                    "fused plain": dataclasses.replace(plain, fused=True, stream=False),
                }
                g, x, t = case.inputs("cpu")
                runs, outs = [], []
                for config in configs.values():
                    out = case.out_like(x)
                    ex = dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config)
                    BACKEND.launch(ex)
                    outs.append(out)
                    runs.append(lambda _, ex=ex: BACKEND.launch(ex))
                view = torch.int32 if dtype is torch.float32 else torch.int16
                same = all(torch.equal(outs[0].view(view), o.view(view)) for o in outs)
                partner = dataclasses.replace(case, layout=InputLayout.CONTIGUOUS)
                pg, px, pt = partner.inputs("cpu")
                pex = partner.phase_one(pg, px, pt, partner.out_like(px), "cpu")
                runs.append(lambda _, ex=pex: BACKEND.launch(ex))
                *rows, contiguous = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
                parts = [
                    f"{case.label():40s} bits {'equal' if same else 'DIFFER'}; partner {contiguous.median_s * 1e6:.0f}"
                ]
                for name, config, r in zip(configs, configs.values(), rows, strict=True):
                    over = [m / c for m, c in zip(r.medians, contiguous.medians, strict=True)]
                    parts.append(
                        f"  {name:13s} [{config.short()}] {r.median_s * 1e6:7.1f}"
                        f" x {statistics.median(over):.2f} ({spread(over, '.2f')})"
                    )
                print("\n".join(parts), flush=True)


if __name__ == "__main__":
    main()
