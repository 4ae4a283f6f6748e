"""Run 8's probe: KL's summed case (input one row against target's 64, each output a sum of 64
terms) through the Triton reduce walk with its sums split over 1, 2, 4, 8 or 16 lanes
(triton_loops.reduce_lanes, forced here through REDUCE_LANES / REDUCE_LANE_TERMS), beside the walk
before the split (one lane per output; its triton_loops.py given as OLD_LOOPS), the contiguous
partner and PyTorch's eager backward, launch-free, in the same interleaved rounds, at the default
config (the report's summed rows take it). Each split's output is checked against the reference
(Case.mismatch) before it is timed.

Usage: python reduce_lanes.py OLD_LOOPS [ROUNDS]
  OLD_LOOPS: `git show bd862bc:kernels/backends/triton_loops.py > old.py`
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable

import torch

from kernels import backends, timing
from kernels.backends import triton_loops
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout

LANES = (1, 2, 4, 8, 16)


def load(path: str) -> object:
    spec = importlib.util.spec_from_file_location("triton_loops_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def split(ex: object, lanes: int) -> Callable[[int], object]:
    """The shipped launch with the split forced to ``lanes`` (the module's constants are read at
    each launch, so each call sets them)."""

    def run(_: int) -> None:
        triton_loops.REDUCE_LANES, triton_loops.REDUCE_LANE_TERMS = lanes, 1
        backends.get("cuda").launch(ex)

    return run


def row(old: object, log: bool, dtype: torch.dtype, red: Reduction, rounds: int) -> list[float]:
    """Median us of: the old walk, each split, the contiguous partner, PyTorch's backward."""
    case = Case(Op.KL_DIV, dtype, (1 << 22,), red, log, InputLayout.SUMMED)
    g, x, t = case.inputs("cuda")
    out = case.out_like(x)
    ex = case.phase_one(g, x, t, out, "cuda")
    ref = case.reference(g, x, t)
    for lanes in LANES:
        split(ex, lanes)(0)
        bad = case.mismatch(out, ref, g, x, t)
        assert bad is None, (case.label, lanes, bad)
    partner = Case(Op.KL_DIV, dtype, (1 << 22,), red, log)
    pg, px, pt = partner.inputs("cuda")
    pex = partner.phase_one(pg, px, pt, partner.out_like(px), "cuda")
    vendor = case.baseline()
    extra = {"num_warps": ex.config.num_warps}
    runs = [
        lambda _: old.launch(ex, extra=extra, tiles_2d=True, approx_exp2=True, rne_cast=True),  # type: ignore[attr-defined]
        *(split(ex, k) for k in LANES),
        lambda _: backends.get("cuda").launch(pex),
        lambda _: vendor(g, x, t),
    ]
    timed = timing.interleaved(runs, "cuda", rounds=rounds, min_time_s=0.005)
    print(f"config: {ex.config.short()}", file=sys.stderr)
    return [r.median_s * 1e6 for r in timed]


def main() -> None:
    old = load(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    shipped = (triton_loops.REDUCE_LANES, triton_loops.REDUCE_LANE_TERMS)
    names = ["old", *(f"rb={k}" for k in LANES), "partner", "torch"]
    print(f"2^22 elements, summed: out (1, 65536), 64 terms each; default config; {rounds} rounds")
    print("op         dtype    grad | " + " ".join(f"{n:>8}" for n in names) + " (us) | best x partner, x torch")
    for log in (False, True):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for red in (Reduction.NONE, Reduction.MEAN):
                us = row(old, log, dtype, red, rounds)
                best = min(us[1 : 1 + len(LANES)])
                grad = "full" if red is Reduction.NONE else "0-d"
                label = f"{'kl_div-log' if log else 'kl_div':10} {str(dtype)[6:]:8} {grad:4}"
                ratios = f"{best / us[-2]:.2f} {us[-1] / best:.2f}"
                print(f"{label} | " + " ".join(f"{u:8.1f}" for u in us) + f" | {ratios}", flush=True)
    triton_loops.REDUCE_LANES, triton_loops.REDUCE_LANE_TERMS = shipped


if __name__ == "__main__":
    main()
