"""Section 82: blocks of interleaved rounds one after another in one process: the default, the
configs given (KEY=VALUE,... of tile, prefetch, stream) and the control, no vendor; each block's
default time, and each config's round ratios over the default with their chance against the
control's: whether what a config reads moves with the host's regime from one block to the next.
``--copy`` times a torch copy of the kernel's bytes in the rounds too: whether the copy moves with it.

    python results/bench/<host>/probes/blocks.py OP DTYPE LOG2 REDUCTION BLOCKS ROUNDS MIN_TIME [CONFIG ...] [--copy]

Output: ``blocks-mse-float16-2p24.txt``. Not part of the package."""

import statistics
import sys
import time

import torch

sys.path.insert(0, "results/bench/x86_64-avx2-2t-znver3-cpu-only/probes")
from probe_args import case as case_of  # noqa: E402
from probe_args import configs as configs_of  # noqa: E402

from kernels import timing  # noqa: E402
from tuner.goals import spread  # noqa: E402
from tuner.study import _Bench, chance, round_ratios  # noqa: E402


def main() -> None:
    case = case_of(*sys.argv[1:5])
    blocks, rounds, min_time = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
    t0 = time.perf_counter()
    bench = _Bench.make(case, "cpu")
    default = bench.executor(None).space.default
    configs = [default, *configs_of(default, [s for s in sys.argv[8:] if s != "--copy"])]
    runs = [bench.runner(bench.executor(c)) for c in configs] + [bench.runner(bench.executor(default))]
    control = len(configs)
    if "--copy" in sys.argv:  # a torch copy of the kernel's bytes (half read, half written) in the rounds too
        src = torch.empty(bench.bytes() // 2 // 4, dtype=torch.float32)
        dst = torch.empty_like(src)
        runs.append(lambda _: dst.copy_(src))
    print(
        f"# {case.label()}: {blocks} blocks of {rounds} rounds, min_time {min_time} s, no vendor;"
        " over the default: median (min-max), chance against the control"
    )
    for b in range(blocks):
        start = time.perf_counter() - t0
        m = timing.interleaved(runs, bench.out.device, rounds=rounds, min_time_s=min_time, seed=b)
        base = list(m[0].medians)
        ctl = round_ratios(base, list(m[control].medians))
        cells = [
            f"control {statistics.median(ctl):.2f} ({spread(ctl, '.2f')})",
            f"default {m[0].median_s * 1e6:.0f} us",
        ]
        for i, c in enumerate(configs[1:], 1):
            r = round_ratios(base, list(m[i].medians))
            cells.append(f"{c.short()} {statistics.median(r):.2f} ({spread(r, '.2f')}) {chance(r, ctl):.3f}")
        if len(m) > control + 1:
            cells.append(f"copy {m[-1].median_s * 1e6:.0f} us")
        print(f"block {b} at {start:.0f} s: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
