"""One KL log_target row at two configs, in interleaved rounds in one process, beside torch's copy
of the same working set: the tier table's config against the one the Xeon's chip table froze for
it (results/performance.md, section 103). Outputs bit for bit first. Run from the repository root:

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/checked_bf16/configs_ab.py \
        bfloat16 26 mean 7 'variant=scalar_grad,tile=4096,cores=2' 'variant=scalar_grad,tile=1024,cores=2,prefetch=2'

Not part of the package.
"""

from __future__ import annotations

import statistics
import sys

import torch

from kernels import timing
from kernels.backends.cpu import BACKEND
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case


def _config(text: str) -> Tiling:
    fields = dict(kv.split("=") for kv in text.split(","))
    return Tiling.from_dict({k: (v if k == "variant" else int(v)) for k, v in fields.items()})


def main() -> None:
    dtype, k, rounds = getattr(torch, sys.argv[1]), int(sys.argv[2]), int(sys.argv[4])
    red = Reduction[sys.argv[3].upper()]
    configs = [_config(c) for c in sys.argv[5:7]]
    case = Case(Op.KL_DIV, dtype, (1 << k,), red, log_target=True)
    g, x, t = case.inputs("cpu")
    outs, runs = [], []
    for config in configs:
        out = case.out_like(x)
        ex = case.phase_one(g, x, t, out, "cpu", config=config)
        BACKEND.launch(ex)
        outs.append(out)
        runs.append(lambda _, ex=ex: BACKEND.launch(ex))
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the bits differ"
    moved = timing.bytes_moved([g, t], outs[0])
    copy, copied = timing.copy_probe("cpu", moved)
    measured = timing.interleaved([*runs, copy], rounds=rounds, min_time_s=0.15, grain=timing.Grain.LAUNCH)
    *rows, cp = measured
    print(f"# {case.label()}, {rounds} interleaved rounds, launch by launch; median us (min-max of the rounds)")
    for config, r in zip(configs, rows, strict=True):
        roof = [c * moved / copied / m for c, m in zip(cp.medians, r.medians, strict=True)]
        us = [m * 1e6 for m in r.medians]
        median = statistics.median(roof)
        print(f"{config.short():48s} {r.median_s * 1e6:8.1f} ({spread(us, '.0f')})  roofline {median:.0%}")
    ratios = [b / a for a, b in zip(rows[0].medians, rows[1].medians, strict=True)]
    gbs = copied / cp.median_s / 1e9
    print(f"second/first {statistics.median(ratios):.3f} ({spread(ratios, '.3f')}); copy {gbs:.1f} GB/s")


if __name__ == "__main__":
    main()
