"""Probe (performance.md section 42): the shipped transposed walk into outs whose rows are padded,
against the contiguous loop, in one process. Evidence run by hand, not part of the package.

A transposed case's out is (64, n / 64), its rows a power of two apart, so the lines one register
block stores (one per row, all at the same column) share every address bit below the row stride.
Padding each row by PAD elements moves row i's lines by i * PAD elements: 64 or 256 bytes changes
the bits of the L1 set index (bits 6-11), 4 KiB or more leaves those and changes only higher ones.
The contract gives out as the caller passes it, so the package cannot pad; this measures what the
power-of-two row stride costs. Every config the space offers, each output checked.

    python out_padding.py LOG2_SIZE ROUNDS OP:DTYPE:REDUCTION[,...] PAD[,PAD...]

``THP_MEM_ALLOC_ENABLE=1`` in the environment puts torch's large tensors on 2 MiB pages.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys

import torch
from _rounds import print_ratios, row_cases

from kernels import backends


def main() -> None:
    be = backends.get("cpu")
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    pads = [int(p) for p in sys.argv[4].split(",")]
    for spec in sys.argv[3].split(","):
        contiguous, case, dtype, (tg, tx, tt) = row_cases(spec, n)
        reference = case.reference(tg, tx, tt).float()
        runs, names = [lambda _, e=contiguous: be.launch(e)], [f"contiguous {contiguous.config.short()}"]
        rows, cols = tx.shape
        for pad in pads:
            out = torch.empty(rows, cols + pad, dtype=dtype)[:, :cols]
            ex = case.phase_one(tg, tx, tt, out, "cpu")
            for stream, row in itertools.product((False, True), (0, 32)):
                cfg = dataclasses.replace(
                    ex.config, stream=stream, transpose_row=row, transpose_in=False
                )  # the shipped order (section 42 added another)
                if cfg not in ex.space:
                    continue
                e = case.phase_one(tg, tx, tt, out, "cpu", config=cfg)
                be.launch(e)
                torch.testing.assert_close(e.out.float(), reference, rtol=2e-3, atol=6e-8)
                runs.append(lambda _, e=e: be.launch(e))
                names.append(f"pad {pad} {cfg.short()}")
        print_ratios(spec, names, runs, rounds)


if __name__ == "__main__":
    main()
