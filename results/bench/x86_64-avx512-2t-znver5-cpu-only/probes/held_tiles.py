"""Several transposed-walk tiles held before out's rows are stored (results/performance.md, section 91).

Section 66's store probe (``store_rows.py``) stored an 8 MiB float16 out from a buffer in other
shapes: 64 rows of 128 elements (the deferred walk's tile) took 3.70x a flat store, 64 rows of 512
1.79x, of 2048 1.43x. This probe asks whether the walk gains that: ``held_tiles.diff`` (beside this
file; apply it to cpu_loops.py at 9657214 and revert after) adds ``transposed_grouped_walk``, the
deferred walk with K consecutive tiles of a column strip transposed into one held buffer (rows K x
128 long, padded a line apart so they leave the power-of-two stride) before their out rows are
stored, each group's 64 rows stored during the next group's pass (a), one every K pieces, from a
second buffer. ``cpu_loops.HELD_TILES`` (read when a backend builds its loops) picks K; 0 builds the
shipped walk. One process, interleaved rounds:

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/held_tiles.py 7 1,4,8

For each 16-bit transposed row at 2^22 that the report misses (and kl_div float16 full), the
shipped config (the Zen 5 table's, on a backend with K = 0), and the same config deferred at each K
with ordinary and with streamed stores, against the contiguous partner. Outputs bit for bit first.
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
    (Op.MSE, False, torch.bfloat16, Reduction.MEAN),
    (Op.KL_DIV, False, torch.float16, Reduction.MEAN),
    (Op.KL_DIV, False, torch.float16, Reduction.NONE),
    (Op.KL_DIV, False, torch.bfloat16, Reduction.MEAN),
)


def launch(be: CpuBackend, k: int, ex: object) -> None:
    """``ex`` on ``be``, whose loops are built with HELD_TILES = k: a backend builds a formula's loops
    on its first launch of that formula, reading HELD_TILES then (not when it is constructed)."""
    cpu_loops.HELD_TILES = k
    be.launch(ex)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    ks = [int(k) for k in sys.argv[2].split(",")] if len(sys.argv) > 2 else [1, 4, 8]
    assert hasattr(cpu_loops, "HELD_TILES"), "apply held_tiles.diff to kernels/backends/cpu_loops.py first"
    table = {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(SHIPPED.read_text())["entries"]}
    shipped_be, held = CpuBackend(), {k: CpuBackend() for k in ks}
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; ratios over the contiguous partner, median (min-max)")
    for op, log, dtype, red in ROWS:
        case = Case(op, dtype, (N,), red, log_target=log, layout=InputLayout.TRANSPOSED)
        base = table[case.label()]
        g, x, t = case.inputs("cpu")
        variants = [("shipped " + base.short(), shipped_be, 0, base)]
        for k in ks:
            for stream in (False, True):
                config = dataclasses.replace(base, defer_out=True, transpose_in=False, stream=stream)
                variants.append((f"K={k} {'nt' if stream else 'ord'}", held[k], k, config))
        outs, exs = [], []
        for _, be, k, config in variants:
            out = case.out_like(x)
            ex = case.phase_one(g, x, t, out, "cpu", config=config)
            launch(be, k, ex)
            outs.append(out)
            exs.append(ex)
        for out in outs[1:]:
            assert torch.equal(outs[0].view(torch.uint8), out.view(torch.uint8)), "bits differ"
        flat = Case(case.op, case.dtype, case.shape, case.reduction, log_target=case.log_target)
        fg, fx, ft = flat.inputs("cpu")
        fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu")
        launch(shipped_be, 0, fex)
        runs = [(lambda _, be=be, ex=ex: be.launch(ex)) for (_, be, _, _), ex in zip(variants, exs, strict=True)]
        runs.append(lambda _, ex=fex: shipped_be.launch(ex))
        measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.1)
        print(f"## {case.label()}  partner {measured[-1].median_s * 1e6:.0f} us", flush=True)
        for (name, _, _, _), r in zip(variants, measured, strict=False):
            ratios = [a / b for a, b in zip(r.medians, measured[-1].medians, strict=True)]
            print(
                f"  {name:40s} {r.median_s * 1e6:7.0f} us  {statistics.median(ratios):.2f} ({spread(ratios, '.2f')})",
                flush=True,
            )


if __name__ == "__main__":
    main()
