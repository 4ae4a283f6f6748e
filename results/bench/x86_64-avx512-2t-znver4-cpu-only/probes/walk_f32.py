"""Section 47 of results/performance.md: the float32 transposed walk against a hand-written C one.

walk_f32.c is kl_div float32 with a 0-d gradient: a contiguous loop and the transposed walk with
16 x 16 zmm transposes (the tables' float32 entries use whole-line rows), with modes for pass (a)
alone and pass (a) plus the transposes but no stores into out. Timed in interleaved rounds in one
process against our contiguous loop and our transposed walk (this host's tables' configs). Every
run that writes all of out is checked against the float64 reference first, each on its own. Not
part of the package: run by hand, as

    OMP_WAIT_POLICY=passive python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/walk_f32.py
"""

from __future__ import annotations

import argparse
import ctypes
import pathlib
import tempfile
from collections.abc import Callable

import torch
from _rounds import build_c, ratio_table, row_cases

from kernels import backends

HERE = pathlib.Path(__file__).resolve().parent


def build(tmp: str) -> ctypes.CDLL:
    c = build_c(HERE / "walk_f32.c", tmp)
    args = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_float, ctypes.c_int, ctypes.c_int]
    c.f32_contiguous.argtypes = args
    c.f32_walk.argtypes = [*args, ctypes.c_int]
    if c.f32_init() != 0:
        raise RuntimeError("walk_f32.c: its 16 x 16 transpose does not leave whole columns")
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=22, help="elements, as a power of two (at least 13)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    n, th = 1 << args.log2n, args.threads
    launch = backends.get("cpu").launch
    ours, tp, _, (tg, tx, tt) = row_cases("kl_div:float32:mean", n)
    g, x, t = ours.grad, ours.inp, ours.target  # the contiguous case's own inputs
    out, tout, cout, wout = ours.out, tp.out_like(tx), tp.out_like(x), tp.out_like(tx)
    ours_t = tp.phase_one(tg, tx, tt, tout, "cpu")
    print(f"2^{args.log2n}, {th} threads, {args.rounds} rounds")
    print(f"ours: contiguous {ours.config.short()}; transposed {ours_t.config.short()}")
    c = float(-g.double() / n)
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(tmp)
        p = torch.Tensor.data_ptr
        runs: dict[str, Callable[[int], object]] = {
            "ours, contiguous": lambda _: launch(ours),
            "C, contiguous": lambda _: lib.f32_contiguous(p(t), p(cout), n, c, th, 0),
            "C, contiguous, streamed": lambda _: lib.f32_contiguous(p(t), p(cout), n, c, th, 1),
            "ours, transposed": lambda _: launch(ours_t),
            "C walk": lambda _: lib.f32_walk(p(tt), p(wout), n, c, th, 0, 0),
            "C walk, streamed": lambda _: lib.f32_walk(p(tt), p(wout), n, c, th, 1, 0),
            "C walk, pass (a) alone": lambda _: lib.f32_walk(p(tt), p(wout), n, c, th, 0, 1),
            "C walk, (a) + transposes, no out": lambda _: lib.f32_walk(p(tt), p(wout), n, c, th, 0, 2),
            "C skewed walk": lambda _: lib.f32_walk(p(tt), p(wout), n, c, th, 0, 3),
            "C skewed walk, streamed": lambda _: lib.f32_walk(p(tt), p(wout), n, c, th, 1, 3),
            "C walk, skewed stores only (out wrong)": lambda _: lib.f32_walk(p(tt), p(wout), n, c, th, 0, 4),
        }
        # Each output on its own, zeroed first. The timing-only modes (pass (a) alone, (a) + the
        # transposes, the skewed stores alone) leave out wrong or unwritten and are not checked.
        checked = {
            "ours, contiguous": (out, tp, (g, x, t)),
            "C, contiguous": (cout, tp, (g, x, t)),
            "C, contiguous, streamed": (cout, tp, (g, x, t)),
            "ours, transposed": (tout, tp, (tg, tx, tt)),
            "C walk": (wout, tp, (tg, tx, tt)),
            "C walk, streamed": (wout, tp, (tg, tx, tt)),
            "C skewed walk": (wout, tp, (tg, tx, tt)),
            "C skewed walk, streamed": (wout, tp, (tg, tx, tt)),
        }
        for name, (got, case, ins) in checked.items():
            got.zero_()
            runs[name](0)
            torch.testing.assert_close(got, case.reference(*ins).float(), rtol=2e-6, atol=1e-30, msg=name)
        ratio_table(runs, args.rounds, "ours, contiguous")


if __name__ == "__main__":
    main()
