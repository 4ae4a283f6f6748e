"""The deferred transposed walk storing nothing into out (results/performance.md, section 91).

What out's stores cost inside the walk, rather than from a buffer alone (section 66's
``store_rows.py``): ``no_out.diff`` (beside this file; apply it to cpu_loops.py at 9657214 and
revert after) adds ``cpu_loops.NO_OUT``, read when a backend builds a formula's loops (its first
launch of that formula): True builds the deferred walk without any store into out (its pass (a),
its transposes into the held tile, nothing else). One process, interleaved rounds:

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/no_out.py 7

For five 16-bit transposed 0-d/full rows at 2^22 that the report misses or nearly misses: the
shipped config deferred (``defer_out``), ordinary and streamed stores, each with and without out's
stores, against the contiguous partner. A timing-only mode: the no-out variants leave out unwritten.
Not part of the package.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import statistics
import sys

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout

SHIPPED = pathlib.Path(__file__).resolve().parents[4] / "kernels/configs/cpu/x86_64-avx512-znver5-2t.json"
N = 1 << 22
ROWS = (
    (Op.MSE, False, torch.float16, Reduction.MEAN),
    (Op.KL_DIV, False, torch.float16, Reduction.MEAN),
    (Op.KL_DIV, False, torch.float16, Reduction.NONE),
    (Op.KL_DIV, False, torch.bfloat16, Reduction.MEAN),
    (Op.MSE, False, torch.bfloat16, Reduction.MEAN),
)


def launch(be: CpuBackend, no_out: bool, ex: object) -> None:
    """``ex`` on ``be``, whose loops are built with NO_OUT = no_out (read at its first launch)."""
    cpu_loops.NO_OUT = no_out
    be.launch(ex)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    assert hasattr(cpu_loops, "NO_OUT"), "apply no_out.diff to kernels/backends/cpu_loops.py first"
    table = {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(SHIPPED.read_text())["entries"]}
    stores, none = CpuBackend(), CpuBackend()
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; over the contiguous partner, median (min-max)")
    for op, log, dtype, red in ROWS:
        case = Case(op, dtype, (N,), red, log_target=log, layout=InputLayout.TRANSPOSED)
        base = table[case.label()]
        g, x, t = case.inputs("cpu")
        variants = []
        for stream in (False, True):
            config = dataclasses.replace(base, defer_out=True, transpose_in=False, stream=stream)
            name = f"deferred {'nt' if stream else 'ord'}"
            variants += [(name, stores, False, config), (f"{name}, no out", none, True, config)]
        exs = []
        for _, be, no_out, config in variants:
            ex = case.phase_one(g, x, t, case.out_like(x), "cpu", config=config)
            launch(be, no_out, ex)
            exs.append(ex)
        flat = Case(case.op, case.dtype, case.shape, case.reduction, log_target=case.log_target)
        fg, fx, ft = flat.inputs("cpu")
        fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu")
        launch(stores, False, fex)
        runs = [(lambda _, be=be, ex=ex: be.launch(ex)) for (_, be, _, _), ex in zip(variants, exs, strict=True)]
        runs.append(lambda _, ex=fex: stores.launch(ex))
        measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.1)
        print(f"## {case.label()} (shipped {base.short()})  partner {measured[-1].median_s * 1e6:.0f} us", flush=True)
        for (name, _, _, _), r in zip(variants, measured, strict=False):
            ratios = [a / b for a, b in zip(r.medians, measured[-1].medians, strict=True)]
            print(
                f"  {name:24s} {r.median_s * 1e6:7.0f} us  {statistics.median(ratios):.2f} ({spread(ratios, '.2f')})",
                flush=True,
            )


if __name__ == "__main__":
    main()
