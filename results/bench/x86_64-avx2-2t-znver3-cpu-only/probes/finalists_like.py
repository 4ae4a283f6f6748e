"""Section 82: the tuner's finalists' rounds replayed for one case: the default, the configs given
(KEY=VALUE,... of tile, prefetch, stream), the control (the default on an executor of its own) and
the vendor, interleaved as ``tuner.study._finalists`` times them, then the same without the vendor
(``--without-first``: the other way round); each config's round ratios over the default and their
chance against the control's.

    python results/bench/<host>/probes/finalists_like.py \
        OP DTYPE LOG2 REDUCTION ROUNDS MIN_TIME [CONFIG ...] [--without-first]

Output: ``finalists_like.txt``. Not part of the package."""

import statistics
import sys

sys.path.insert(0, "results/bench/x86_64-avx2-2t-znver3-cpu-only/probes")
from probe_args import case as case_of  # noqa: E402
from probe_args import configs as configs_of  # noqa: E402

from kernels import timing  # noqa: E402
from tuner.goals import spread  # noqa: E402
from tuner.study import _Bench, chance, round_ratios  # noqa: E402


def main() -> None:
    case, rounds, min_time = case_of(*sys.argv[1:5]), int(sys.argv[5]), float(sys.argv[6])
    bench = _Bench.make(case, "cpu")
    default = bench.executor(None).space.default
    configs = [default, *configs_of(default, [spec for spec in sys.argv[7:] if not spec.startswith("--")])]
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
