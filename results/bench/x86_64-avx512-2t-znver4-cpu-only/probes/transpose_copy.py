"""Probe (performance.md section 45): the transposed rows against the plain transposed copy a user
could call instead. KL with a 0-d gradient reads the target alone, so its transposed walk moves the
bytes of a transposed copy (out = c * t.T); torch's own ``copy_`` of the same transposed view, and
of a contiguous tensor of the same size, are timed beside it and the contiguous loop in one
process. Evidence run by hand, not part of the package.

    python transpose_copy.py LOG2_SIZE ROUNDS DTYPE[,...]
"""

from __future__ import annotations

import sys

from _rounds import print_ratios, row_cases

from kernels import backends


def main() -> None:
    be = backends.get("cpu")
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    for dt in sys.argv[3].split(","):
        for op in ("kl_div", "kl_div-log"):
            contiguous, case, dtype, (tg, tx, tt) = row_cases(f"{op}:{dt}:mean", n)
            out = case.out_like(tx)
            table = case.phase_one(tg, tx, tt, out, "cpu")
            plain = tt.contiguous()
            runs = [
                lambda _, o=out, p=plain: o.copy_(p),
                lambda _, o=out, v=tt: o.copy_(v),
                lambda _, e=contiguous: be.launch(e),
                lambda _, e=table: be.launch(e),
            ]
            names = [
                "torch copy_, contiguous",
                "torch copy_ of the transposed view",
                f"{op} 0-d contiguous {contiguous.config.short()}",
                f"{op} 0-d transposed {table.config.short()}",
            ]
            print_ratios(f"{op} {dt} 2^{n.bit_length() - 1}, over torch's contiguous copy", names, runs, rounds)


if __name__ == "__main__":
    main()
