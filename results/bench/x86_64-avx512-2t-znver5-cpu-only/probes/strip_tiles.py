"""One-line strips as the inputs-first walk's tiles on the Zen 5 (results/performance.md, section 66).

``store_rows.py`` found out's stores cheaper when fewer rows take longer runs at a time (16 rows of
512 elements 1.2x a flat store from L1, the walk's 64 rows of 128 3.7x). The inputs-first walk
(cpu_loops ``transposed_in``, Tiling.transpose_in, offered for KL's 0-d gradient) can take such
tiles without shortening its formula's runs: its transposes read the target a row piece at a time
at any stride, and its formula runs along out's rows. A tile ``columns`` wide (32: one line of a
16-bit target, 16: one of float32) and 16 KiB tall then has each thread write that many out rows at
a time in runs of 256 elements.

The tile's width is ``cpu_loops._TILE_COLS``, a constant each walk reads when numba compiles it (on
its first call for a dtype). So, per KL 0-d row at 2^22, in one process: the shipped config is
launched first with the width at 64 (the walk the report runs), then the width is set to
``columns`` and the inputs-first configs (ordinary and streamed stores, each register row the host
offers) are launched, each compiling with it; then all of them and the contiguous partner are timed
in interleaved rounds. A row whose shipped config is itself inputs-first is left out (its walk would
be compiled once, at one width). A probe's edit of a constant, not a knob. Outputs bit for bit
against the shipped config first. Not part of the package.

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/strip_tiles.py 32 5 16
    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/strip_tiles.py 16 5 32

(arguments: tile columns, rounds, the dtypes' bits; 64 columns times the 64-column inputs-first
walk beside the shipped config).
"""

from __future__ import annotations

import pathlib
import sys

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from walk_knobs import BACKEND, SHIPPED, configs, over, partner  # noqa: E402  (a probe beside this one)

N = 1 << 22
DTYPES = {"16": (torch.float16, torch.bfloat16), "32": (torch.float32,)}
WIDE = cpu_loops._TILE_COLS


def row(case: Case, shipped: Tiling, columns: int, rounds: int) -> None:
    g, x, t = case.inputs("cpu")
    base = {**shipped.to_dict(), "defer_out": False, "transpose_in": True}
    tried = [
        Tiling.from_dict({**base, "stream": stream, "transpose_row": r})
        for stream in (False, True)
        for r in cpu_loops.TRANSPOSE_ROWS
    ]
    outs = [case.out_like(x) for _ in range(len(tried) + 1)]
    exs = [case.phase_one(g, x, t, o, "cpu", config=c) for o, c in zip(outs, (shipped, *tried), strict=True)]
    cpu_loops._TILE_COLS = WIDE
    BACKEND.launch(exs[0])  # compiles the shipped walk at the report's width
    cpu_loops._TILE_COLS = columns
    for ex in exs[1:]:
        BACKEND.launch(ex)  # compiles the inputs-first walk at ``columns``
    cpu_loops._TILE_COLS = WIDE
    assert all(torch.equal(o, outs[0]) for o in outs[1:]), "a strip's bits differ from the shipped config's"
    fex = partner(case)
    runs = [lambda _, e=e: BACKEND.launch(e) for e in exs] + [lambda _: BACKEND.launch(fex)]
    m = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    name = "kl_div-log" if case.log_target else "kl_div"
    cells = [f"{r.median_s * 1e6:.0f} us, {over(r, m[-1])}" for r in m[:-1]]
    print(
        f"| {columns} | {name} | {str(case.dtype).removeprefix('torch.')} | {m[-1].median_s * 1e6:.0f} "
        f"| {shipped.short()}: {cells[0]} | " + " | ".join(cells[1:]) + " |",
        flush=True,
    )


def main() -> None:
    columns = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    bits = sys.argv[3] if len(sys.argv) > 3 else "16"
    shipped = configs(SHIPPED)
    heads = [
        f"inputs first, {'streamed' if s else 'ordinary'}, row {r or 'host'}"
        for s in (False, True)
        for r in cpu_loops.TRANSPOSE_ROWS
    ]
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; each cell: median us, over the partner per round")
    print("| tile columns | op | dtype | partner us | shipped config (64 columns) | " + " | ".join(heads) + " |")
    print("|---|---|---|---|---|" + "---|" * len(heads))
    for log in (False, True):
        for dtype in DTYPES[bits]:
            case = Case(Op.KL_DIV, dtype, (N,), Reduction.MEAN, log_target=log, layout=InputLayout.TRANSPOSED)
            config = shipped[case.label()]
            if config.transpose_in:
                print(f"# {case.label()}: shipped inputs-first ({config.short()}), left out", flush=True)
                continue
            row(case, config, columns, rounds)


if __name__ == "__main__":
    main()
