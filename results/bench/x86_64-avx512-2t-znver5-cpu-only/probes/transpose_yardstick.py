"""How much a transposed read costs torch's own copy on the Zen 5 (results/performance.md, section 65).

The layout goal reads a transposed row's time over its contiguous partner's. The rows left over
1.5x after section 65 are 0-d rows, whose partner moves the fewest bytes of the report (kl_div's
0-d gradient is the target's copy, scaled). A yardstick for the walk: torch's ``copy_`` from the
same transposed view into the same contiguous out (its own transposing loop), over ``copy_`` from
a contiguous tensor. Per row at 2^22, interleaved in one process: the transposed call (the
shipped table's config), its contiguous partner (the config its lookup gives), torch's transposed
copy of the target into out, and torch's contiguous copy. Medians (us) and per-round ratios,
median (min-max). Not part of the package.

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/transpose_yardstick.py 7

With ``full`` after the rounds it also times the full-gradient rows of mse and l1 float16 (the
Zen 3's worst; section 72 ran it so on the Zen 3: ``bench/x86_64-avx2-2t-znver3-cpu-only/
transpose_yardstick-2p22.txt``). The contiguous partner's config is the host's lookup, so the
probe runs on any host.
"""

from __future__ import annotations

import pathlib
import sys

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from walk_knobs import BACKEND, over, partner  # noqa: E402  (a probe beside this one)

N = 1 << 22
ROWS = (
    (Op.MSE, False, torch.float16, Reduction.MEAN),
    (Op.MSE, False, torch.bfloat16, Reduction.MEAN),
    (Op.KL_DIV, False, torch.float32, Reduction.MEAN),
    (Op.KL_DIV, False, torch.float16, Reduction.MEAN),
    (Op.KL_DIV, False, torch.bfloat16, Reduction.MEAN),
    (Op.KL_DIV, True, torch.float32, Reduction.MEAN),
    (Op.KL_DIV, False, torch.float16, Reduction.NONE),
    (Op.KL_DIV, False, torch.bfloat16, Reduction.NONE),
)
FULL_ROWS = ((Op.MSE, False, torch.float16, Reduction.NONE), (Op.L1, False, torch.float16, Reduction.NONE))


def row(op: Op, log: bool, dtype: torch.dtype, reduction: Reduction, rounds: int) -> None:
    case = Case(op, dtype, (N,), reduction, log_target=log, layout=InputLayout.TRANSPOSED)
    g, x, t = case.inputs("cpu")
    out = case.out_like(x)
    ex = case.phase_one(g, x, t, out, "cpu")
    fex = partner(case)
    src = t.contiguous()
    dst = torch.empty_like(src)
    runs = [
        lambda _: BACKEND.launch(ex),
        lambda _: BACKEND.launch(fex),
        lambda _: out.copy_(t),
        lambda _: dst.copy_(src),
    ]
    m = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    name = "kl_div-log" if log else op.value
    grad = "0-d" if reduction is Reduction.MEAN else "full"
    us = " | ".join(f"{r.median_s * 1e6:.0f}" for r in m)
    print(
        f"| {name} | {str(dtype).removeprefix('torch.')} | {grad} | {us} | {over(m[0], m[1])} | {over(m[2], m[3])} "
        f"| {over(m[0], m[2])} |",
        flush=True,
    )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    threads = torch.get_num_threads()
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds, torch {torch.__version__}, {threads} threads")
    print(
        "| op | dtype | grad | walk us | partner us | torch transposed copy us | torch copy us "
        "| walk / partner | torch transposed / torch copy | walk / torch transposed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = ROWS + (FULL_ROWS if sys.argv[2:3] == ["full"] else ())
    for op, log, dtype, reduction in rows:
        row(op, log, dtype, reduction, rounds)


if __name__ == "__main__":
    main()
