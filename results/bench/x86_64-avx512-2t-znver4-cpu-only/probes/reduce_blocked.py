"""Section 53 of results/performance.md: the reduce walk's strided lanes blocked through the
register transposes (cpu_loops.REDUCE_BLOCK_LANES), input (R, 1) against target (R, C), against
the walk at OLD (one strided load per lane and term) and PyTorch's eager expression and sum.

For each geometry at about 2^n elements of B = broadcast(input, target), KL plain and log_target,
each dtype, a 0-d gradient (mean) and one of B's shape (none), in interleaved rounds in one
process: the contiguous case of B's size, the old walk, today's and the vendor; medians (us) and
each one's per-round ratio over the contiguous case. Old and new outputs are checked bitwise equal
first (each output's order did not change). Not part of the package: run by hand, as

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/reduce_blocked.py 22 5
"""

from __future__ import annotations

import sys

import torch
from _rounds import backend_at, print_ratios
from reduce_walk import one_row

from kernels import backends

OLD = "d744f09"  # the last commit whose strided lanes load one element per lane and term


def geometries(n: int) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input, target) shapes of about n elements of B."""
    return {
        "short rows: (R, 1) against (R, 64)": ((n // 64, 1), (n // 64, 64)),
        "shorter rows: (R, 1) against (R, 24)": ((n // 24, 1), (n // 24, 24)),
        "and a leading dim: (R, 1) against (4, R, 16)": ((n // 64, 1), (4, n // 64, 16)),
    }


def main() -> None:
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    old, new = backend_at(OLD), backends.get("cpu")
    for title, shapes in geometries(n).items():
        for reduction in ("mean", "none"):
            for log in (False, True):
                for dtype in (torch.float32, torch.float16, torch.bfloat16):
                    name, runs, fns = one_row(old, new, title, shapes, log, dtype, reduction, OLD)
                    print_ratios(f"{name}, {'0-d' if reduction == 'mean' else 'full'} gradient", runs, fns, rounds)


if __name__ == "__main__":
    main()
