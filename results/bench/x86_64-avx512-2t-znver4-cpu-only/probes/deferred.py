"""Probe (performance.md section 43): the transposed walk with out's stores deferred into the next
tile's formula pass (Tiling.defer_out) against the same config without, and against the contiguous
loop, in one process. Evidence run by hand, not part of the package. Each output is checked bitwise
against the shipped walk's.

    python deferred.py LOG2_SIZE ROUNDS OP:DTYPE:REDUCTION[,...]

Every config of the space with defer_out set is timed beside its twin without it.
"""

from __future__ import annotations

import dataclasses
import sys

import torch
from _rounds import print_ratios, row_cases

from kernels import backends


def main() -> None:
    be = backends.get("cpu")
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    for spec in sys.argv[3].split(","):
        contiguous, case, dtype, (tg, tx, tt) = row_cases(spec, n)
        table = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu")
        runs = [lambda _, e=contiguous: be.launch(e), lambda _, e=table: be.launch(e)]
        names = [f"contiguous {contiguous.config.short()}", f"table {table.config.short()}"]
        for cfg in [c for c in table.space if c.defer_out and c.cores == table.config.cores]:
            twin = dataclasses.replace(cfg, defer_out=False)
            pair = [case.phase_one(tg, tx, tt, case.out_like(tx), "cpu", config=c) for c in (twin, cfg)]
            for e in pair:
                be.launch(e)
            bits = [e.out.view(torch.int16 if dtype.itemsize == 2 else torch.int32) for e in pair]
            assert torch.equal(bits[0], bits[1]), cfg
            runs += [lambda _, e=e: be.launch(e) for e in pair]
            names += [c.short() for c in (twin, cfg)]
        print_ratios(spec, names, runs, rounds)


if __name__ == "__main__":
    main()
