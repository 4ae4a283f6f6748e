"""Section 77's lead: the transposed walk at a size its table has no entry for, at each tile.

The AVX2 table's transposed entries are all at 2^22. At 2^21 a transposed call runs the 2^22
entry's config carried (unstreamed) or the default, and ``probes/carry.py`` found the common
configs' taller tiles (16384, 32768) at 0.74-0.84x the default's time there. For every op x dtype
x gradient kind at the size given (default 2^21), this times in interleaved rounds in one process:
the config the lookup gives, the default at each of the host's transposed tiles, and the
contiguous partner (the report's yardstick for the layout goal); it prints each one's median (us)
and its time over the default's, round by round, median (min-max), and the lookup's over the
partner. Outputs bit for bit against the default's first.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/transposed_tiles.py [ROUNDS] [LOG2_SIZE]

Section 78 ran it at 2^16-2^21 on the table of section 77 (``transposed_tiles-2p16.txt`` ...
``-2p21.txt``), then, after the table's studies at 2^20 and 2^21 and the default's tile for a
carry to a smaller problem, at 2^21, 2^19 and 2^16 again (``transposed_tiles-2p*-after.txt``).

Not part of the package. No study decides anything from it: it says whether a study at that size
could.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from kernels import dispatch, timing
from kernels.backends import cpu_loops
from kernels.executor import Executor
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout
from tuner.study import round_ratios

OPS = {"mse": (Op.MSE, False), "l1": (Op.L1, False), "kl_div": (Op.KL_DIV, False), "kl_div-log": (Op.KL_DIV, True)}
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def over(a: list[float], b: list[float]) -> str:
    """``a`` over ``b`` round by round: the median (min-max), as the Zen 5's probes print it."""
    r = round_ratios(b, a)
    return f"{statistics.median(r):.2f} ({spread(r, '.2f')})"


def row(name: str, case: Case, rounds: int) -> None:
    g, x, t = case.inputs("cpu")
    looked = case.phase_one(g, x, t, case.out_like(x), "cpu")
    default = looked.space.default
    tiles = [dataclasses.replace(default, tile=tile) for tile in cpu_loops.TRANSPOSED_TILES]
    configs: list[Tiling] = [looked.config] + [c for c in tiles if c != looked.config]
    exs: list[Executor] = [looked] + [case.phase_one(g, x, t, case.out_like(x), "cpu", config=c) for c in configs[1:]]
    flat = Case(case.op, case.dtype, case.shape, case.reduction, log_target=case.log_target)
    fg, fx, ft = flat.inputs("cpu")
    exs.append(flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu"))
    for ex in exs:
        dispatch.run(ex)
    bits = torch.int16 if case.dtype.itemsize == 2 else torch.int32
    for c, ex in zip(configs, exs, strict=False):
        assert torch.equal(exs[0].out.view(bits), ex.out.view(bits)), f"{case.label()} {c.short()}: bits differ"
    measured = timing.interleaved([lambda _, e=e: dispatch.run(e) for e in exs], rounds=rounds, min_time_s=0.1)
    base = measured[configs.index(default)].medians if default in configs else None
    grad = "0-d" if case.reduction is Reduction.MEAN else "full"
    dtype = str(case.dtype).removeprefix("torch.")
    cells = []
    for i, c in enumerate(configs):
        label = f"{c.short()}{' (lookup)' if i == 0 else ''}"
        vs = over(measured[i].medians, base) if base is not None else "-"
        cells.append(f"{label}: {measured[i].median_s * 1e6:.0f} us, {vs}")
    partner = over(measured[0].medians, measured[-1].medians)
    print(f"| {name} | {dtype} | {grad} | {looked.config_source} | {'; '.join(cells)} | {partner} |", flush=True)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    n = 1 << (int(sys.argv[2]) if len(sys.argv) > 2 else 21)
    size = f"2^{n.bit_length() - 1}"
    print(f"# {cpu_loops.target_cpu()}, {size} transposed, {rounds} rounds; over the default: median (min-max)")
    print("| op | dtype | grad | lookup | each config: us, over the default | lookup over the contiguous partner |")
    print("|---|---|---|---|---|---|")
    for name, (op, log) in OPS.items():
        for dtype in DTYPES:
            for reduction in (Reduction.NONE, Reduction.MEAN):
                row(name, Case(op, dtype, (n,), reduction, log_target=log, layout=InputLayout.TRANSPOSED), rounds)


if __name__ == "__main__":
    main()
