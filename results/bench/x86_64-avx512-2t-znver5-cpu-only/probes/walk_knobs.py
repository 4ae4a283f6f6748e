"""The Zen 4's transposed-walk knobs on the Zen 5 (results/performance.md, section 64).

cpu_loops offered three knobs of the transposed walk only on the CPUs of ``_SPLIT_512`` (the Zen 4):
half-line register rows (``transpose_row=32``), the inputs-first order (``transpose_in``) and
deferred out stores (``defer_out``). The Zen 5 runs 512-bit operations whole, so it was offered none.
This probe measured what they would give it (section 64); since section 65 (9d8f8c5) the Zen 5 is
offered them (``_WALK_KNOB_CPUS``) and its shipped table holds the knobs' picks, so the "shipped"
column of a run today is no longer the knob-free walk. Run as it was, with the three switches on,

    LOSSTUNE_CPU_HALF_ROWS=1 LOSSTUNE_CPU_INPUTS_FIRST=1 LOSSTUNE_CPU_DEFERRED=1 \\
        python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/walk_knobs.py 7

For every op x 16-bit dtype x gradient kind (none: full, mean: 0-d) at 2^22, the report's layout
size, in interleaved rounds in one process: the transposed call with the shipped config (the Zen
5's table, ``kernels/configs/cpu/x86_64-avx512-znver5-2t.json``, tuned without the knobs), with the
config a study offered the knobs froze (``walk_knobs-table.json`` beside this file), and the
contiguous call with the config its lookup gives (the tables', as in the report). Medians (us) and
each transposed call over the contiguous one per round, median (min-max), as the report's layout
goals read them. Outputs bit for bit first. Not part of the package.
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import CpuBackend
from kernels.executor import Executor
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout

HERE = pathlib.Path(__file__).resolve().parent
SHIPPED = HERE.parents[3] / "kernels/configs/cpu/x86_64-avx512-znver5-2t.json"
N = 1 << 22
BACKEND = CpuBackend()


def configs(path: pathlib.Path) -> dict[str, Tiling]:
    return {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(path.read_text())["entries"]}


def over(a: timing.Rounds, b: timing.Rounds) -> str:
    """``a`` over ``b`` round by round: the median (min-max), as the report's layout goals read it."""
    r = [x / y for x, y in zip(a.medians, b.medians, strict=True)]
    return f"{statistics.median(r):.2f} ({spread(r, '.2f')})"


def partner(case: Case) -> Executor:
    """The contiguous call of ``case``'s op, dtype, size and reduction, at the config its lookup
    gives (the tables', as in the report): the transposed row's partner in the layout goal."""
    flat = Case(case.op, case.dtype, case.shape, case.reduction, log_target=case.log_target)
    g, x, t = flat.inputs("cpu")
    return flat.phase_one(g, x, t, flat.out_like(x), "cpu")


def row(case: Case, shipped: Tiling, knobs: Tiling, rounds: int) -> None:
    g, x, t = case.inputs("cpu")
    outs = [case.out_like(x), case.out_like(x)]
    exs = [case.phase_one(g, x, t, out, "cpu", config=c) for out, c in zip(outs, (shipped, knobs), strict=True)]
    for ex in exs:
        BACKEND.launch(ex)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the two configs' bits differ"
    fex = partner(case)
    runs = [lambda _: BACKEND.launch(exs[0]), lambda _: BACKEND.launch(exs[1]), lambda _: BACKEND.launch(fex)]
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    name = "kl_div-log" if case.log_target else case.op.value
    grad = "0-d" if case.reduction is Reduction.MEAN else "full"
    print(
        f"| {name} | {str(case.dtype).removeprefix('torch.')} | {grad} | {knobs.short()} "
        f"| {measured[0].median_s * 1e6:.0f} | {measured[1].median_s * 1e6:.0f} "
        f"| {measured[2].median_s * 1e6:.0f} | {over(measured[0], measured[2])} | {over(measured[1], measured[2])} |",
        flush=True,
    )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    assert cpu_loops.TRANSPOSE_ROWS != (0,) and cpu_loops.INPUTS_FIRST and cpu_loops.DEFERRED, (
        "run with LOSSTUNE_CPU_HALF_ROWS=1 LOSSTUNE_CPU_INPUTS_FIRST=1 LOSSTUNE_CPU_DEFERRED=1"
    )
    shipped, knobs = configs(SHIPPED), configs(HERE / "walk_knobs-table.json")
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; contiguous: the config its lookup gives")
    print(
        "| op | dtype | grad | knob config | shipped us | knobs us | contiguous us "
        "| shipped / contiguous | knobs / contiguous |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for op, log in ((Op.MSE, False), (Op.L1, False), (Op.KL_DIV, False), (Op.KL_DIV, True)):
        for dtype in (torch.float16, torch.bfloat16):
            for reduction in (Reduction.NONE, Reduction.MEAN):
                case = Case(op, dtype, (N,), reduction, log_target=log, layout=InputLayout.TRANSPOSED)
                row(case, shipped[case.label()], knobs[case.label()], rounds)


if __name__ == "__main__":
    main()
