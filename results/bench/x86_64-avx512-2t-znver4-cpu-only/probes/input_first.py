"""Probe (performance.md section 42): the transposed walk with its passes swapped, as it was measured
before it landed as cpu_loops.transposed_in (Tiling.transpose_in), timed against the
shipped walk and the contiguous loop in one process. Evidence run by hand, not part of the package.

The shipped walk (kernels/backends/cpu_loops.py, ``transposed``) runs the formula into an L1 buffer
in the inputs' order, then transposes the buffer into out through registers. This one transposes
the target's tile into the buffer first (out's order) with the same register transposes, then runs
the formula along out's rows, so out's stores come from the vectorised formula loop. Only for a
formula that reads the target alone with a 0-d gradient (KL, mean/sum): one operand to transpose,
as the shipped walk has one output. Every output is checked bitwise against the shipped walk's.

    python input_first.py LOG2_SIZE ROUNDS OP:DTYPE:REDUCTION[,...] [--split]

``--split`` also times each pass alone (the other skipped; the output then wrong, timing only).
"""

from __future__ import annotations

import dataclasses
import itertools
import sys

import numpy as np
import torch
from _rounds import print_ratios, row_cases
from numba import njit, prange

from kernels import backends
from kernels.backends import cpu_loops as loops
from kernels.backends.cpu import TAGS, _walk_arrays

BOTH, TRANSPOSES, FORMULA = 3, 1, 2  # which passes run


def build(value_py, tile_bytes: int, row: int, wide: bool):
    value = njit(inline="always")(value_py)
    vectors = loops._wide_vectors if wide else loops._default_vectors
    pair = loops._TRANSPOSES[row].pair
    row_bytes = loops._row_bytes(row)
    view, load, store, stream_out, sfence = loops._view, loops._load, loops._store, loops._stream_out, loops._sfence
    cols_per_tile = loops._TILE_COLS

    def walk(pg, px, pt, po, tg, tx, tt, to, spans, shape, strides, n, cof64, nblocks, stream, passes):
        g, t, o = view(pg, spans[0], tg), view(pt, spans[2], tt), view(po, spans[3], to)
        cof = np.float32(cof64)
        rows, cols = np.uint64(shape[0]), np.uint64(shape[1])
        tr, tc = np.uint64(tile_bytes // cols_per_tile // o.itemsize), np.uint64(cols_per_tile)
        one = np.uint64(1)
        row_tiles, col_tiles = (rows + tr - one) // tr, (cols + tc - one) // tc
        so1, st0 = np.uint64(strides[3, 1]), np.uint64(strides[2, 0])
        for b in prange(nblocks):
            vectors()
            tb = np.empty(tile_bytes // o.itemsize, tt.dtype)
            sb = np.empty(tile_bytes // cols_per_tile // o.itemsize if stream else 0, to.dtype)
            g0 = load(g, 0)
            ntiles = row_tiles * col_tiles
            share = (ntiles + np.uint64(nblocks) - one) // np.uint64(nblocks)
            for tile_no in range(np.uint64(b) * share, min(ntiles, (np.uint64(b) + one) * share)):
                r0, c0 = (np.uint64(tile_no) % row_tiles) * tr, (np.uint64(tile_no) // row_tiles) * tc
                nr, nc = min(rows - r0, tr), min(cols - c0, tc)  # whole tiles only (checked below)
                side = np.uint64(row_bytes // o.itemsize)
                # (a'): the target's tile through registers into the buffer, rows nr apart (out's order)
                for c in range(np.uint64(0), nc if passes & TRANSPOSES else np.uint64(0), side):
                    for r in range(np.uint64(0), nr, np.uint64(2) * side):
                        pair(t, (r0 + r) * st0 + c0 + c, st0, tb, c * nr + r, nr)
                # (b'): the formula along each of out's rows (a run of nr elements per row)
                for c in range(nc if passes & FORMULA else np.uint64(0)):
                    base, at = c * nr, (c0 + c) * so1 + r0
                    if stream:
                        for r in range(nr):
                            store(sb, r, value(g0, load(tb, base + r), load(tb, base + r), cof))
                        stream_out(sb, nr, o, at, po)
                    else:
                        for r in range(nr):
                            store(o, at + r, value(g0, load(tb, base + r), load(tb, base + r), cof))
            if stream:
                sfence()

    return njit(parallel=True, nogil=True)(walk)


_built: dict[tuple[str, bool, int], object] = {}


def runner(ex, stream: bool, row: int, passes: int = BOTH):
    formula, narrow = ex.formula, ex.out.dtype is not torch.float32
    assert not formula.reads_input and ex.grad.numel() == 1, "target-only formulas with a 0-d gradient"
    geo = ex.geometry
    tile_bytes = loops.TRANSPOSED_TILES[0] * 4
    assert geo.shape[0] % (tile_bytes // loops._TILE_COLS // ex.out.element_size()) == 0
    assert geo.shape[1] % loops._TILE_COLS == 0, "whole tiles only"
    key = (formula.name, narrow, row)
    if key not in _built:
        fn_py = formula.narrow_value if narrow and formula.narrow_value is not None else formula.value
        _built[key] = build(fn_py, tile_bytes, row, formula.compute_bound)
    fn = _built[key]
    g, t, o = ex.grad, ex.target, ex.out
    ops = (g.data_ptr(), t.data_ptr(), t.data_ptr(), o.data_ptr(), TAGS[g.dtype], TAGS[t.dtype], TAGS[t.dtype])
    arrays = _walk_arrays(geo, 2)

    def run(_: object = None) -> None:
        loops.set_threads(2)
        fn(*ops, TAGS[o.dtype], *arrays, geo.numel, ex.cof, 2, stream, passes)

    return run


def main() -> None:
    be = backends.get("cpu")
    n, rounds, split = 1 << int(sys.argv[1]), int(sys.argv[2]), "--split" in sys.argv
    for spec in sys.argv[3].split(","):
        contiguous, case, _, (tg, tx, tt) = row_cases(spec, n)
        ex = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu")
        runs, names = [lambda _, e=contiguous: be.launch(e)], [f"contiguous {contiguous.config.short()}"]
        for stream, row in itertools.product((False, True), loops.TRANSPOSE_ROWS):
            cfg = dataclasses.replace(
                ex.config, stream=stream, transpose_row=row, cores=2, transpose_in=False
            )  # the shipped order (section 42 added another)
            if cfg not in ex.space:
                continue
            shipped = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu", config=cfg)
            be.launch(shipped)
            mine = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu", config=cfg)
            run = runner(mine, stream, row)
            run()
            assert torch.equal(mine.out, shipped.out), (spec, cfg.short())
            runs += [lambda _, e=shipped: be.launch(e), run]
            names += [f"shipped {cfg.short()}", f"input-first {cfg.short()}"]
            if split:
                runs += [runner(mine, stream, row, TRANSPOSES), runner(mine, stream, row, FORMULA)]
                names += ["  its transposes alone", "  its formula pass alone"]
        print_ratios(spec, names, runs, rounds)


if __name__ == "__main__":
    main()
