"""What out's store pattern costs the transposed walk on the Zen 5 (results/performance.md, section 66).

A tile of the walk (16 KiB, 64 columns of the inputs by 128 rows for a 16-bit type) ends as 64 runs
of 128 elements, one in each of 64 out rows 65536 elements apart (the report's 2^22 layout): the
lines of one tile's runs share their cache sets. This probe stores a buffer (L1 or L2, below) into
the same 8 MiB float16 out (64 rows of 65536) in other shapes: ``rows`` rows at a time, runs of
``run`` elements in each, the walk's (64, 128) first, every shape the same 8 MiB; two threads, each
half of every row, as the walk shares its tiles. Ordinary stores and non-temporal ones (cpu_loops
``_rows_out``, the deferred walk's own loop), against one flat store of the 8 MiB from L1.
Interleaved rounds in one process; medians (us) and the per-round ratio to the flat store, median
(min-max). The buffer is rows x run elements: 16 KiB for every shape but 64 x 512 (64 KiB) and 64 x
2048 (256 KiB), which are read from L2 (the Zen 5's L1d is 48 KiB). Not part of the package.

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/store_rows.py 7
"""

from __future__ import annotations

import statistics
import sys

import numpy as np
from numba import njit, prange

from kernels import timing
from kernels.backends import cpu_loops as L
from tuner.goals import spread

N = 1 << 22
OUT_ROWS = 64
ROW = N // OUT_ROWS
SHAPES = ((64, 128), (64, 512), (64, 2048), (32, 256), (16, 512), (8, 1024), (4, 2048))


def rows_in(stream: bool, rows: int, run: int):
    """Out stored ``rows`` rows at a time, ``run`` elements of each, from one L1 buffer."""

    @njit(parallel=True, nogil=True)
    def store(o):
        zero, stride = np.uint64(0), np.uint64(ROW)
        half = ROW // 2
        for b in prange(2):
            held = np.zeros(rows * run, o.dtype)
            for r0 in range(0, OUT_ROWS, rows):
                for s in range(b * half, (b + 1) * half, run):
                    at = np.uint64(r0 * ROW + s)
                    L._rows_out(held, zero, np.uint64(rows), np.uint64(run), o, at, stride, stream)
            if stream:
                L._sfence()

    return store


@njit(parallel=True, nogil=True)
def flat(o):
    tile = np.uint64(8192)
    for b in prange(2):
        held = np.zeros(8192, o.dtype)
        half = o.size // 2
        for s in range(b * half, (b + 1) * half, 8192):
            for i in range(tile):
                o[np.uint64(s) + i] = held[i]


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    raw = np.zeros(N + 32, np.int16)
    skip = (-raw.ctypes.data % L.LINE) // raw.itemsize  # non-temporal stores need aligned lines
    out = raw[skip : skip + N]
    shapes = [(stream, rows, run) for stream in (False, True) for rows, run in SHAPES]
    stores = [rows_in(*shape) for shape in shapes]
    runs = [lambda _: flat(out)] + [lambda _, f=f: f(out) for f in stores]
    m = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    print(f"# {L.target_cpu()}, float16 out of 64 rows x 65536, {rounds} rounds, 2 threads")
    print(f"# one flat store of the 8 MiB from L1: {m[0].median_s * 1e6:.0f} us")
    print("| stores | rows at a time | run (elements) | us | over the flat store |")
    print("|---|---|---|---|---|")
    for (stream, rows, run), r in zip(shapes, m[1:], strict=True):
        ratio = [a / b for a, b in zip(r.medians, m[0].medians, strict=True)]
        kind = "non-temporal" if stream else "ordinary"
        print(f"| {kind} | {rows} | {run} | {r.median_s * 1e6:.0f} | {over(ratio)} |", flush=True)


def over(ratio: list[float]) -> str:
    """Per-round ratios as the report's layout goals read them: the median (min-max)."""
    return f"{statistics.median(ratio):.2f} ({spread(ratio, '.2f')})"


if __name__ == "__main__":
    main()
