"""Section 47 of results/performance.md: section 35's exp cuts, measured in C beside our loop.

exp_cuts.c has kl_div log_target float16 with a 0-d gradient four ways (A: the shipped formula,
B: the scale's exponent in float, C: B with g * -m folded into the polynomial, D: a 32-entry
2^(i/32) table in registers with a degree-1 polynomial). This times them in interleaved rounds in
one process, with our contiguous loop (this host's table's config) and a plain copy of the same
bytes, at each size given. Every output is checked first: within one float16 ulp of the float64
reference. Not part of the package: run by hand, as

    OMP_WAIT_POLICY=passive python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/exp_cuts.py
"""

from __future__ import annotations

import argparse
import ctypes
import pathlib
import statistics
import tempfile
from collections.abc import Callable

import torch
from _rounds import build_c

from kernels import backends, timing
from kernels.modes import Op, Reduction
from tuner.problems import Case

HERE = pathlib.Path(__file__).resolve().parent
MODES = {"A shipped": 0, "B exponent in float": 1, "C B + g*m folded": 2, "D 32-entry table": 3}


def build(tmp: str) -> ctypes.CDLL:
    c = build_c(HERE / "exp_cuts.c", tmp, ("-lm",))
    c.exp_loop.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_float, ctypes.c_float]
    c.exp_loop.argtypes += [ctypes.c_int, ctypes.c_int]
    c.copy16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    c.exp_init()
    return c


def ulps(got: torch.Tensor, want: torch.Tensor) -> float:
    """The largest distance in float16 ulps (of the reference's binade) between got and the float64
    reference."""
    w = want.abs().clamp_min(2.0**-14)
    ulp = torch.exp2(torch.floor(torch.log2(w)) - 10)
    return float(((got.double() - want) / ulp).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", default="18,24", help="sizes, as powers of two, comma-separated")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        lib = build(tmp)
        for log2n in map(int, args.log2n.split(",")):
            one_size(lib, log2n, args.rounds, args.threads)


def one_size(lib: ctypes.CDLL, log2n: int, rounds: int, th: int) -> None:
    """Checks every loop's output at 2^log2n elements, then times them and prints the table."""
    launch = backends.get("cpu").launch
    p = torch.Tensor.data_ptr
    n = 1 << log2n
    case = Case(Op.KL_DIV, torch.float16, (n,), Reduction.MEAN, log_target=True)
    g, x, t = case.inputs("cpu")
    out, cout = case.out_like(x), case.out_like(x)
    ours = case.phase_one(g, x, t, out, "cpu")
    want = case.reference(g, x, t)
    gf, cof = float(g), 1.0 / n
    print(f"2^{log2n}, {th} threads, {rounds} rounds; ours: {ours.config.short()}")
    launch(ours)
    print(f"  ours: {ulps(out, want):.2f} ulp")
    for name, mode in MODES.items():
        cout.zero_()
        lib.exp_loop(p(t), p(cout), n, gf, cof, mode, th)
        err = ulps(cout, want)
        print(f"  {name}: {err:.2f} ulp")
        if err > 1.0:
            raise RuntimeError(f"{name}: {err:.2f} float16 ulps from the reference")
    runs: dict[str, Callable[[int], object]] = {
        "copy (same bytes)": lambda _: lib.copy16(p(t), p(cout), n, th),
        "ours": lambda _: launch(ours),
    }
    for name, mode in MODES.items():
        runs[name] = lambda _, mode=mode: lib.exp_loop(p(t), p(cout), n, gf, cof, mode, th)
    timed = timing.interleaved(list(runs.values()), rounds=rounds, min_time_s=0.15)
    times = {k: list(v.medians) for k, v in zip(runs, timed, strict=True)}
    base, copy = times["ours"], times["copy (same bytes)"]
    print("| run | median us | GB/s | over ours | % of the copy |")
    print("|---|---|---|---|---|")
    for k, v in times.items():
        r = [a / b for a, b in zip(v, base, strict=True)]
        pct = [100 * c / a for a, c in zip(v, copy, strict=True)]
        gbs = 4 * n / statistics.median(v) / 1e9
        print(
            f"| {k} | {statistics.median(v) * 1e6:.0f} | {gbs:.1f} | {statistics.median(r):.2f} "
            f"({min(r):.2f}-{max(r):.2f}) | {statistics.median(pct):.0f} ({min(pct):.0f}-{max(pct):.0f}) |"
        )


if __name__ == "__main__":
    main()
