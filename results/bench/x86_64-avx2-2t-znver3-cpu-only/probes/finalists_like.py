"""Section 82: the tuner's finalists' rounds replayed for one case: the default, the configs given
(KEY=VALUE,... of tile, prefetch, stream), the control (the default on an executor of its own) and
the vendor, interleaved as ``tuner.study._finalists`` times them, then the same without the vendor
(``--without-first``: the other way round); each config's round ratios over the default and their
chance against the control's.

    python results/bench/<host>/probes/finalists_like.py \
        OP DTYPE LOG2 REDUCTION ROUNDS MIN_TIME [CONFIG ...] [--without-first]

Output: ``finalists_like.txt``. Not part of the package."""

import dataclasses
import statistics
import sys

import torch

from kernels import timing
from kernels.modes import Op, Reduction
from tuner.goals import spread
from tuner.problems import Case
from tuner.study import _Bench, chance, round_ratios

OPS = {"mse": (Op.MSE, False), "l1": (Op.L1, False), "kl_div": (Op.KL_DIV, False), "kl_div-log": (Op.KL_DIV, True)}


def main() -> None:
    op, dtype, log2, red, rounds, min_time = (
        sys.argv[1],
        getattr(torch, sys.argv[2]),
        int(sys.argv[3]),
        sys.argv[4],
        int(sys.argv[5]),
        float(sys.argv[6]),
    )
    conv = {"tile": int, "prefetch": int, "stream": lambda s: s == "1"}
    o, log = OPS[op]
    case = Case(o, dtype, (1 << log2,), Reduction.parse(red, allow_batchmean=True), log_target=log)
    bench = _Bench.make(case, "cpu")
    default = bench.executor(None).space.default
    configs = [default] + [
        dataclasses.replace(default, **{k: conv[k](v) for k, v in (kv.split("=") for kv in spec.split(","))})
        for spec in sys.argv[7:]
        if not spec.startswith("--")
    ]
    runs = [bench.runner(bench.executor(c)) for c in configs] + [bench.runner(bench.executor(default))]
    vendor = case.baseline()
    for with_vendor in (False, True) if "--without-first" in sys.argv else (True, False):
        rs = runs + ([lambda _: vendor(bench.g, bench.x, bench.t)] if with_vendor else [])
        m = timing.interleaved(rs, bench.out.device, rounds=rounds, min_time_s=min_time, seed=7)
        base = list(m[0].medians)
        ctl = round_ratios(base, list(m[len(configs)].medians))
        which = "with" if with_vendor else "without"
        ctl_read = f"{statistics.median(ctl):.2f} ({spread(ctl, '.2f')})"
        print(f"# {case.label()}, {rounds} rounds, min_time {min_time} s, {which} the vendor; control {ctl_read}")
        for i, c in enumerate(configs[1:], 1):
            r = round_ratios(base, list(m[i].medians))
            print(f"  {c.short()}: {statistics.median(r):.2f} ({spread(r, '.2f')}), chance {chance(r, ctl):.3f}")


if __name__ == "__main__":
    main()
