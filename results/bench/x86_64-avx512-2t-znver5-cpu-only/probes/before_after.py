"""Each transposed row whose table config differs between two config files, the first's config against
the second's in interleaved rounds in one process, over the contiguous partner at the second's
config, or the lookup's where it has none (results/performance.md, section 93; every op, and any
two tables, since section 95; the lookup's partner since section 96; at the label's size, not
2^22 alone, since section 97). The
configs come from two JSON files (``{case label: config dict}``, every entry fresh where written:
by a checkout of each commit, or from two tables). Outputs bit for bit first. Run from the
repository root:

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/before_after.py BEFORE.json NOW.json 7

Not part of the package.
"""

from __future__ import annotations

import json
import statistics
import sys

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout

BACKEND = CpuBackend()
# by the label's op: the op and log_target (Case.label)
OPS = {"mse": (Op.MSE, False), "l1": (Op.L1, False), "kl_div": (Op.KL_DIV, False), "kl_div-log": (Op.KL_DIV, True)}
REDUCTIONS = {"mean": Reduction.MEAN, "none": Reduction.NONE}


def main() -> None:
    before, now = ({k: Tiling.from_dict(v) for k, v in json.load(open(p)).items()} for p in sys.argv[1:3])
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    print(f"# each label's size, {rounds} rounds; over the contiguous partner, median (min-max)")
    for label, config in now.items():
        if before[label] == config or "transposed" not in label:
            continue
        op, dtype, numel, _, red = label.split()
        (kind, log), red_ = OPS[op], REDUCTIONS[red]
        case = Case(kind, getattr(torch, dtype), (int(numel),), red_, log_target=log, layout=InputLayout.TRANSPOSED)
        flat = Case(case.op, case.dtype, case.shape, case.reduction, log_target=log)
        variants = [("before: " + before[label].short(), before[label]), ("now: " + config.short(), config)]
        g, x, t = case.inputs("cpu")
        outs, exs = [], []
        for _, c in variants:
            out = case.out_like(x)
            ex = case.phase_one(g, x, t, out, "cpu", config=c)
            BACKEND.launch(ex)
            outs.append(out)
            exs.append(ex)
        bits = torch.int16 if case.dtype.itemsize == 2 else torch.int32
        assert torch.equal(outs[0].view(bits), outs[1].view(bits)), "the configs' bits differ"
        fg, fx, ft = flat.inputs("cpu")
        # the partner at NOW's config for its own label, else at the lookup's (a chip table of
        # transposed entries alone holds no contiguous partner); the same yardstick for both
        fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu", config=now.get(flat.label()))
        runs = [(lambda _, ex=ex: BACKEND.launch(ex)) for ex in exs]
        runs.append(lambda _, ex=fex: BACKEND.launch(ex))
        measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
        print(f"## {label}  partner {measured[-1].median_s * 1e6:.0f} us", flush=True)
        for (name, _), r in zip(variants, measured, strict=False):
            ratios = [a / b for a, b in zip(r.medians, measured[-1].medians, strict=True)]
            print(
                f"  {name:72s} {r.median_s * 1e6:7.0f} us  {statistics.median(ratios):.2f} ({spread(ratios, '.2f')})",
                flush=True,
            )


if __name__ == "__main__":
    main()
