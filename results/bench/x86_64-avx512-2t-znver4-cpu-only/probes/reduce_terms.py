"""Section 55 of results/performance.md: the reduce walk's sums in groups of cpu_loops.REDUCE_TERMS
terms (added in float32, then one Kahan step per group), the unit-stride lanes taking a group per
pass over them with each lane's sum held in registers, against the walk at OLD (a Kahan step and a
pass per term: each lane's sum and compensation loaded and stored for every term) and PyTorch's
eager expression and sum.

Input (1, C) against target (R, C), at about 2^n elements of the broadcast shape B: R = 64 (the
report's summed rows), 8, and 6 (a group, then two terms alone); or, with ``blocked``, section 53's
geometries (input (R, 1) against target (R, C): the blocked strided lanes, a group per four terms
of a staged chunk). KL plain and log_target, each
dtype, a 0-d gradient (mean) and one of B's shape (none), in interleaved rounds in one process: the
contiguous case of B's size, the old walk, today's and the vendor; medians (us) and each one's
per-round ratio over the contiguous case. The new output is checked within SEMANTICS' bar for a
broadcast sum first (the groups change the order, so the bits). Not part of the package: run by
hand, as

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/reduce_terms.py 22 5 [64,8,6 | blocked]
"""

from __future__ import annotations

import sys

import torch
from _rounds import backend_at, print_ratios
from reduce_blocked import geometries as blocked
from reduce_walk import one_row

from kernels import backends

OLD = "c707026"  # the last commit whose unit-stride lanes take one term per pass


def geometries(n: int, rows: tuple[int, ...]) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input, target) shapes of about n elements of B."""
    return {f"(1, C) against ({r}, C)": ((1, n // r), (r, n // r)) for r in rows}


def main() -> None:
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    which = sys.argv[3] if len(sys.argv) > 3 else "64,8,6"
    shapes_of = blocked(n) if which == "blocked" else geometries(n, tuple(map(int, which.split(","))))
    old, new = backend_at(OLD), backends.get("cpu")
    for title, shapes in shapes_of.items():
        for reduction in ("mean", "none"):
            for log in (False, True):
                for dtype in (torch.float32, torch.float16, torch.bfloat16):
                    name, runs, fns = one_row(old, new, title, shapes, log, dtype, reduction, OLD, same_bits=False)
                    print_ratios(f"{name}, {'0-d' if reduction == 'mean' else 'full'} gradient", runs, fns, rounds)


if __name__ == "__main__":
    main()
