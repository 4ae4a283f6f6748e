"""Section 47 of results/performance.md: the transposed walk with out's lines leaving in long runs.

staged_out.c is walk_floor.c's walk (kl_div float16, 0-d gradient) with pass (b) storing into an
L2 staging buffer of a few tiles, each of out's 64 rows then copied into out as one run. Timed in
interleaved rounds in one process, against our contiguous loop and our transposed walk (this
host's tables' configs) and the C walk as section 37 built it. Every C output is checked against
the float64 reference first. Not part of the package: run by hand, as

    OMP_WAIT_POLICY=passive python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/staged_out.py
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
    c = build_c(HERE / "staged_out.c", tmp)
    args = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_float, ctypes.c_int, ctypes.c_int]
    c.floor_contiguous.argtypes = args
    c.floor_walk.argtypes = [*args, ctypes.c_int]
    c.staged_walk.argtypes = [*args, ctypes.c_int]
    c.staged_init.argtypes = [ctypes.c_int, ctypes.c_int]
    c.floor_walk.restype = c.floor_contiguous.restype = None  # void: only the staged walk reports a failure
    c.skewed_walk.argtypes = [*args, ctypes.c_int]
    c.rowsplit_walk.argtypes = args
    if c.floor_init() != 0:
        raise RuntimeError("walk_floor.c: its 16 x 16 transpose does not leave whole columns")
    return c


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=22, help="elements, as a power of two (at least 16)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--stages", default="4,16,32", help="tiles per staging buffer, comma-separated")
    args = parser.parse_args()
    n, th = 1 << args.log2n, args.threads
    launch = backends.get("cpu").launch
    ours, tp, _, (tg, tx, tt) = row_cases("kl_div:float16:mean", n)
    g = ours.grad  # the 0-d gradient the C loops scale by
    tout, wout = tp.out_like(tx), tp.out_like(tx)
    ours_t = tp.phase_one(tg, tx, tt, tout, "cpu")
    print(f"2^{args.log2n}, {th} threads, {args.rounds} rounds")
    print(f"ours: contiguous {ours.config.short()}; transposed {ours_t.config.short()}")
    c = float(-g.double() / n)
    want = tp.reference(tg, tx, tt).float()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(tmp)
        p = torch.Tensor.data_ptr
        runs: dict[str, Callable[[int], object]] = {
            "ours, contiguous": lambda _: launch(ours),
            "ours, transposed": lambda _: launch(ours_t),
            "C walk": lambda _: lib.floor_walk(p(tt), p(wout), n, c, th, 0, 0),
            "C walk, streamed": lambda _: lib.floor_walk(p(tt), p(wout), n, c, th, 1, 0),
        }
        runs["C skewed walk"] = lambda _: lib.skewed_walk(p(tt), p(wout), n, c, th, 0, 0)
        runs["C skewed walk, streamed"] = lambda _: lib.skewed_walk(p(tt), p(wout), n, c, th, 1, 0)
        runs["C walk, threads split out's rows"] = lambda _: lib.rowsplit_walk(p(tt), p(wout), n, c, th, 0)
        runs["C walk, threads split out's rows, streamed"] = lambda _: lib.rowsplit_walk(p(tt), p(wout), n, c, th, 1)
        skew_only: dict[str, Callable[[int], object]] = {}  # pass (a) unskewed, out wrong: timing only
        for stream in (0, 1):
            name = "C walk, skewed stores only" + (", streamed" if stream else "") + " (out wrong)"
            skew_only[name] = lambda _, stream=stream: lib.skewed_walk(p(tt), p(wout), n, c, th, stream, 1)
        stages = [int(s) for s in args.stages.split(",") if s]
        if stages and lib.staged_init(th, max(stages)):
            raise RuntimeError(f"staged_init: no room for {th} staging buffers of {max(stages)} tiles")
        for s in stages:
            for stream in (0, 1):
                name = f"C staged, {s} tiles ({s * 256} B runs)" + (", streamed" if stream else "")
                runs[name] = lambda _, s=s, stream=stream: lib.staged_walk(p(tt), p(wout), n, c, th, stream, s)
        for name, run in runs.items():
            if name.startswith("C"):
                wout.zero_()
                if run(0):  # None from the void walks; the others return 0, or -1 for a refused call
                    raise RuntimeError(f"{name}: refused (its staging buffer was not made)")
                torch.testing.assert_close(wout.float(), want, rtol=1e-3, atol=6e-8, msg=lambda m, k=name: f"{k}: {m}")
        runs.update(skew_only)
        launch(ours_t)
        torch.testing.assert_close(tout.float(), want, rtol=1e-3, atol=6e-8)
        ratio_table(runs, args.rounds, "ours, contiguous")


if __name__ == "__main__":
    main()
