"""Section 51 of results/performance.md: the transposed walk's tile buffer pre-arranged so the
register transposes skip their cross-lane round (prearranged.c), against walk_floor.c's walk and
our own, kl_div float16 with a 0-d gradient, in interleaved rounds in one process. Each C walk's
output is checked bitwise against ours first. Ratios are over our contiguous loop, per round, then
the median (min-max). Not part of the package: run by hand, as

    OMP_WAIT_POLICY=passive python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/prearranged.py 22 7
"""

from __future__ import annotations

import ctypes
import pathlib
import sys
import tempfile

import torch
from _rounds import build_c, ratio_table

from kernels import backends
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout

HERE = pathlib.Path(__file__).resolve().parent


def main() -> None:
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    launch = backends.get("cpu").launch
    flat = Case(Op.KL_DIV, torch.float16, (n,), Reduction.MEAN)
    tp = Case(Op.KL_DIV, torch.float16, (n,), Reduction.MEAN, layout=InputLayout.TRANSPOSED)
    g, x, t = flat.inputs("cpu")
    tg, tx, tt = tp.inputs("cpu")
    out, tout, wout = flat.out_like(x), tp.out_like(tx), tp.out_like(tx)
    ours, ours_t = flat.phase_one(g, x, t, out, "cpu"), tp.phase_one(tg, tx, tt, tout, "cpu")
    print(f"2^{sys.argv[1]}, 2 threads, {rounds} rounds; ours: {ours.config.short()} | {ours_t.config.short()}")
    c, p = float(-g.double() / n), torch.Tensor.data_ptr
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_c(HERE / "prearranged.c", tmp)
        args = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_long,
            ctypes.c_float,
            ctypes.c_int,
            ctypes.c_int,
            ctypes.c_int,
        ]
        lib.floor_walk.argtypes = lib.pre_walk.argtypes = args
        if lib.pre_init() != 0:
            raise RuntimeError("prearranged.c: its in-lane rounds do not leave whole columns")
        launch(ours_t)
        for walk in (lib.floor_walk, lib.pre_walk):
            for stream in (0, 1):
                wout.zero_()
                walk(p(tt), p(wout), n, c, 2, stream, 0)
                assert torch.equal(wout, tout), (walk, stream)

        def run(walk: object, stream: int, mode: int) -> object:
            return lambda _: walk(p(tt), p(wout), n, c, 2, stream, mode)

        ratio_table(
            {
                "ours, contiguous": lambda _: launch(ours),
                "ours, transposed": lambda _: launch(ours_t),
                "C walk": run(lib.floor_walk, 0, 0),
                "C walk, streamed": run(lib.floor_walk, 1, 0),
                "pre-arranged": run(lib.pre_walk, 0, 0),
                "pre-arranged, streamed": run(lib.pre_walk, 1, 0),
                "C walk, pass (a) alone": run(lib.floor_walk, 0, 1),
                "pre-arranged, pass (a) alone": run(lib.pre_walk, 0, 1),
                "C walk, (a) + transposes, no out": run(lib.floor_walk, 0, 2),
                "pre-arranged, (a) + transposes, no out": run(lib.pre_walk, 0, 2),
            },
            rounds,
            "ours, contiguous",
        )


if __name__ == "__main__":
    main()
