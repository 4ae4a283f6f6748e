"""Where the transposed walk's time goes on the Zen 5's 0-d rows (results/performance.md, section 66).

The rows the layout goal still misses here are 0-d rows: out is the target (or x - t) scaled, and
the walk (cpu_loops ``transposed`` / ``transposed_deferred``) moves it in 16 KiB tiles: pass (a)
runs the formula along the inputs' order into an L1 buffer, pass (b) moves the buffer into out
through the register transposes, 64 out rows a power of two apart. This probe times the parts
apart, each as a loop of its own over the same 2^22 problem (65536 x 64 in the walk's order, out's
rows 65536 apart), in one process, interleaved rounds, two threads, the tiles shared as the walk
shares them:

- walk / partner: the shipped call and its contiguous partner (the report's two rows). The
  shipped float32 walk is (a) then (b); the deferred 16-bit walks are (a), the transposes and
  rows out (their stores interleaved with the next tile's (a));
- (a): the 0-d KL formula (out = cof * t) tile by tile into one L1 buffer (reads the target, writes
  nothing to memory). For bfloat16 this loop compiles slower than the walk's own pass (a) (it
  reads 1.5-1.6x the whole walk's time): read that column for float16 and float32 only;
- (b): the register transposes of one L1 buffer into out, per tile (writes out, reads nothing);
- transposes: the same into a second L1 buffer (neither reads nor writes memory);
- rows out: an L1 buffer in out's order stored into out's rows (the stores alone, as the
  deferred walk issues them: 64 rows a power of two apart, a tile's 128 elements of each for a
  16-bit type, 64 for float32, which the shipped walk stores from (b) instead).

Each with the stores the row's config takes (streamed or not) and its register rows. Medians (us)
and each part over the partner per round, median (min-max). Not part of the package.

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/walk_parts.py 7
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import torch
from numba import njit, prange

from kernels import timing
from kernels.backends import cpu_loops as L
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from walk_knobs import BACKEND, SHIPPED, configs, over, partner  # noqa: E402  (a probe beside this one)

N = 1 << 22
COLS = L._TILE_COLS
OUT_ROWS = N // COLS  # the walk's rows: out's row stride
TILE_BYTES = 4096 * 4
CASES = (
    (Op.KL_DIV, torch.float16),
    (Op.KL_DIV, torch.bfloat16),
    (Op.KL_DIV, torch.float32),
)
NUMPY = {torch.float16: np.int16, torch.bfloat16: np.uint16, torch.float32: np.float32}


def parts(transpose_row: int, stream: bool):
    """The part loops for register rows ``transpose_row`` and ``stream``ed stores, compiled per element type."""
    pair = L._TRANSPOSES[transpose_row].pair_nt if stream else L._TRANSPOSES[transpose_row].pair
    held_pair = L._TRANSPOSES[transpose_row].pair
    side_bytes = L._row_bytes(transpose_row)

    @njit(inline="always")
    def tiles(b, tr):
        ntiles = OUT_ROWS // tr
        share = ntiles // 2
        return b * share, (b + 1) * share

    @njit(parallel=True, nogil=True)
    def pass_a(t, o, cof):
        tr = TILE_BYTES // COLS // o.itemsize
        for b in prange(2):
            buf = np.empty(tr * COLS, o.dtype)
            lo, hi = tiles(b, tr)
            for k in range(lo, hi):
                base = np.uint64(k * tr * COLS)
                for i in range(np.uint64(tr * COLS)):
                    L._store(buf, i, cof * L._load(t, base + i))
            o[b] = buf[b]  # keeps the buffer live

    def moves(into_out: bool):
        """The register transposes of one L1 buffer per tile: into out's rows (pass (b), with the
        row's stores) where ``into_out``, else into a second L1 buffer (the transposes alone)."""
        move = pair if into_out else held_pair

        @njit(parallel=True, nogil=True)
        def moved(o):
            tr = TILE_BYTES // COLS // o.itemsize
            side = side_bytes // o.itemsize
            for b in prange(2):
                buf = np.zeros(tr * COLS, o.dtype)
                held = np.empty(tr * COLS, o.dtype)
                lo, hi = tiles(b, tr)
                for k in range(lo, hi):
                    for c in range(0, COLS, side):
                        for r in range(0, tr, 2 * side):
                            if into_out:
                                move(buf, r * COLS + c, COLS, o, c * OUT_ROWS + k * tr + r, OUT_ROWS)
                            else:
                                move(buf, r * COLS + c, COLS, held, c * tr + r, tr)
                if into_out and stream:
                    L._sfence()
                if not into_out:
                    o[b] = held[b]  # keeps the held buffer live

        return moved

    @njit(parallel=True, nogil=True)
    def rows_out(o):
        tr = TILE_BYTES // COLS // o.itemsize
        zero, cols, ntr, nrows = np.uint64(0), np.uint64(COLS), np.uint64(tr), np.uint64(OUT_ROWS)
        for b in prange(2):
            held = np.zeros(tr * COLS, o.dtype)
            lo, hi = tiles(b, tr)
            for k in range(lo, hi):
                L._rows_out(held, zero, cols, ntr, o, np.uint64(k) * ntr, nrows, stream)
            if stream:
                L._sfence()

    return pass_a, moves(True), moves(False), rows_out


def row(case: Case, config: Tiling, rounds: int) -> None:
    assert config.tile * 4 == TILE_BYTES, f"the parts are built for 16 KiB tiles, the config has {config.short()}"
    g, x, t = case.inputs("cpu")
    out = case.out_like(x)
    ex = case.phase_one(g, x, t, out, "cpu", config=config)
    fex = partner(case)
    kind = NUMPY[case.dtype]
    tn = fex.target.contiguous().view(torch.float32 if kind is np.float32 else torch.int16).numpy().view(kind)
    raw = np.zeros(N + 64, kind)
    skip = (-raw.ctypes.data % L.LINE) // raw.itemsize  # non-temporal stores need aligned lines
    on = raw[skip : skip + N]
    cof = np.float32(-1.0 / N)
    pass_a, pass_b, transposes, rows_out = parts(config.transpose_row, config.stream)
    runs = [
        lambda _: BACKEND.launch(ex),
        lambda _: BACKEND.launch(fex),
        lambda _: pass_a(tn, on, cof),
        lambda _: pass_b(on),
        lambda _: transposes(on),
        lambda _: rows_out(on),
    ]
    m = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    name = f"{case.op.value} {str(case.dtype).removeprefix('torch.')} 0-d"
    us = " | ".join(f"{r.median_s * 1e6:.0f}" for r in m)
    ratios = " | ".join(over(r, m[1]) for r in (m[0], *m[2:]))
    print(f"| {name} | {config.short()} | {us} | {ratios} |", flush=True)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    shipped = configs(SHIPPED)
    print(f"# {L.target_cpu()}, 2^22 (65536 x 64 in the walk's order), {rounds} rounds, 2 threads")
    heads = ("walk", "partner", "(a)", "(b)", "transposes", "rows out")
    print(
        "| row | config | "
        + " | ".join(f"{h} us" for h in heads)
        + " | "
        + " | ".join(f"{h} / partner" for h in heads if h != "partner")
        + " |"
    )
    print("|---|---|" + "---|" * (2 * len(heads) - 1))
    for op, dtype in CASES:
        case = Case(op, dtype, (N,), Reduction.MEAN, layout=InputLayout.TRANSPOSED)
        row(case, shipped[case.label()], rounds)


if __name__ == "__main__":
    main()
