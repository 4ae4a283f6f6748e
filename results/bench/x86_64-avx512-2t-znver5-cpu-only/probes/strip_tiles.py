"""One-line strips as the inputs-first walk's tiles on the Zen 5 (results/performance.md, section 66).

``store_rows.py`` found out's stores cheaper when fewer rows take longer runs at a time (16 rows of
512 elements 1.3x a flat store from L1, the walk's 64 rows of 128 4.7x). The inputs-first walk
(cpu_loops ``transposed_in``, Tiling.transpose_in, offered for KL's 0-d gradient) can take such
tiles without shortening its formula's runs: its transposes read the target a row piece at a time
at any stride, and its formula runs along out's rows. With ``cpu_loops._TILE_COLS`` set before the
loops compile (a probe's edit, not a knob) a tile is one line of the target wide (32 columns of a
16-bit type, 16 of float32) and 256 rows tall, the same 16 KiB: each thread then writes 32 (16)
out rows at a time, runs of 256 elements. Per KL 0-d row at 2^22: the inputs-first walk, ordinary
and streamed stores, each register row the host offers, over the contiguous partner, interleaved;
run once per tile width (``_TILE_COLS`` is read at compile time):

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/strip_tiles.py 64 5 16
    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/strip_tiles.py 32 5 16
    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/strip_tiles.py 64 5 32
    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/strip_tiles.py 16 5 32

(arguments: tile columns, rounds, the dtypes' bits). Also the shipped config of each row: in a
64-column run the walk the report runs; in a strip run that config's walk with the strip tiles
(for the shipped order, whose formula then runs one line at a time, 1.5-9x the time). Outputs bit for
bit against the shipped config first. Not part of the package.
"""

from __future__ import annotations

import sys

import torch

from kernels.backends import cpu_loops

cpu_loops._TILE_COLS = int(sys.argv[1])  # before any loop compiles: a compile-time constant

from kernels import timing  # noqa: E402
from kernels.modes import Op, Reduction  # noqa: E402
from kernels.tiling import Tiling  # noqa: E402
from tuner.problems import Case, InputLayout  # noqa: E402

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from walk_knobs import BACKEND, SHIPPED, configs, over  # noqa: E402  (a probe beside this one)

N = 1 << 22
DTYPES = {"16": (torch.float16, torch.bfloat16), "32": (torch.float32,)}


def row(dtype: torch.dtype, log: bool, shipped: Tiling, rounds: int) -> None:
    case = Case(Op.KL_DIV, dtype, (N,), Reduction.MEAN, log_target=log, layout=InputLayout.TRANSPOSED)
    flat = Case(Op.KL_DIV, dtype, (N,), Reduction.MEAN, log_target=log)
    g, x, t = case.inputs("cpu")
    base = {**shipped.to_dict(), "defer_out": False, "transpose_in": True}
    tried = [
        Tiling.from_dict({**base, "stream": stream, "transpose_row": r})
        for stream in (False, True)
        for r in cpu_loops.TRANSPOSE_ROWS
    ]
    outs = [case.out_like(x) for _ in range(len(tried) + 1)]
    exs = [case.phase_one(g, x, t, o, "cpu", config=c) for o, c in zip(outs, (shipped, *tried), strict=True)]
    for ex in exs:
        BACKEND.launch(ex)
    assert all(torch.equal(o, outs[0]) for o in outs[1:]), "a strip's bits differ from the shipped config's"
    fg, fx, ft = flat.inputs("cpu")
    fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu")
    runs = [lambda _, e=e: BACKEND.launch(e) for e in exs] + [lambda _: BACKEND.launch(fex)]
    m = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    name = "kl_div-log" if log else "kl_div"
    cells = [f"{r.median_s * 1e6:.0f} us, {over(r, m[-1])}" for r in m[:-1]]
    print(
        f"| {cpu_loops._TILE_COLS} | {name} | {str(dtype).removeprefix('torch.')} | {m[-1].median_s * 1e6:.0f} "
        f"| {shipped.short()}: {cells[0]} | " + " | ".join(cells[1:]) + " |",
        flush=True,
    )


def main() -> None:
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    shipped = configs(SHIPPED)
    heads = [
        f"inputs first, {'streamed' if s else 'ordinary'}, row {r or 'host'}"
        for s in (False, True)
        for r in cpu_loops.TRANSPOSE_ROWS
    ]
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; each cell: median us, over the partner median (min-max)")
    print("| tile columns | op | dtype | partner us | shipped config | " + " | ".join(heads) + " |")
    print("|---|---|---|---|---|" + "---|" * len(heads))
    for log in (False, True):
        for dtype in DTYPES[sys.argv[3] if len(sys.argv) > 3 else "16"]:
            case = Case(Op.KL_DIV, dtype, (N,), Reduction.MEAN, log_target=log, layout=InputLayout.TRANSPOSED)
            row(dtype, log, shipped[case.label()], rounds)


if __name__ == "__main__":
    main()
