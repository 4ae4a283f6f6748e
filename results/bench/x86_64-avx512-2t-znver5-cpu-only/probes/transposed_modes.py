"""Section 71 of results/performance.md: KL log_target's float16 transposed 0-d walk at 2^22 took
one of two times per process with the raw-flag runs (about 257-267 us or 287-300) and one with
the element flag (279-290). This times that call at the shipped config in one process and prints
its median with the operands' addresses mod 4096, and, with ``--offsets``, the same call with out,
then the target, copied to each of eight offsets mod 4096 (interleaved, one process). ``PAD=k``
compiles k small numba functions first, which moves where the walk's code lands in memory. With
``--beside``, the walk, its contiguous partner (the config its lookup gives) and torch's copy of
the partner's output (the copy_ the roofline times) interleaved instead: does the walk's mode
follow the memory's speed?

    LOSSTUNE_CPU_RAW_FLAG=1 PAD=0 python transposed_modes.py [--offsets | --beside]
"""

from __future__ import annotations

import json
import os
import pathlib
import sys

import numba
import torch

for k in range(int(os.environ.get("PAD", "0"))):
    exec(f"def _d{k}(a):\n    return a * {k} + 1.0", globals())
    numba.njit(globals()[f"_d{k}"])(1.0)

from kernels import timing  # noqa: E402
from kernels.backends.cpu import CpuBackend  # noqa: E402
from kernels.modes import Op, Reduction  # noqa: E402
from kernels.tiling import Tiling  # noqa: E402
from tuner.problems import Case, InputLayout  # noqa: E402

SHIPPED = pathlib.Path(__file__).resolve().parents[4] / "kernels/configs/cpu/x86_64-avx512-znver5-2t.json"
N = 1 << 22
OFFSETS = range(0, 4096, 512)


def at_offset(like: torch.Tensor, off: int) -> torch.Tensor:
    """A copy of ``like`` (same shape and strides) whose first element sits at ``off`` mod 4096."""
    big = torch.empty(like.numel() + 4096, dtype=like.dtype)
    e = ((off - big.data_ptr()) % 4096) // like.element_size()
    out = torch.as_strided(big[e:], like.shape, like.stride())
    out.copy_(like)
    return out


def main() -> None:
    backend = CpuBackend()
    shipped = {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(SHIPPED.read_text())["entries"]}
    case = Case(Op.KL_DIV, torch.float16, (N,), Reduction.MEAN, log_target=True, layout=InputLayout.TRANSPOSED)
    config = shipped[case.label()]
    g, x, t = case.inputs("cpu")
    out = case.out_like(x)
    ex = case.phase_one(g, x, t, out, "cpu", config=config)
    if "--beside" in sys.argv:
        flat = Case(case.op, case.dtype, case.shape, case.reduction, log_target=True)
        fg, fx, ft = flat.inputs("cpu")
        fout = flat.out_like(fx)
        fex = flat.phase_one(fg, fx, ft, fout, "cpu")
        src = fout.clone()
        runs = [lambda _: backend.launch(ex), lambda _: backend.launch(fex), lambda _: fout.copy_(src)]
        walk, partner, copy = timing.interleaved(runs, rounds=7, min_time_s=0.15)
        print(
            f"walk {walk.median_s * 1e6:.1f} us, partner {partner.median_s * 1e6:.1f} us, "
            f"walk / partner {walk.median_s / partner.median_s:.2f}, copy of 8 MiB {copy.median_s * 1e6:.1f} us"
        )
        return
    m = timing.interleaved([lambda _: backend.launch(ex)], rounds=5, min_time_s=0.15)
    where = f"t {t.data_ptr() % 4096} out {out.data_ptr() % 4096} g {g.data_ptr() % 4096}"
    print(f"{m[0].median_s * 1e6:.1f} us ({where} mod 4096)")
    if "--offsets" not in sys.argv:
        return
    for name in ("out", "t"):
        exs = []
        for off in OFFSETS:
            o, tt = (at_offset(out, off), t) if name == "out" else (out, at_offset(t, off))
            exs.append(case.phase_one(g, x, tt, o, "cpu", config=config))
        m = timing.interleaved([lambda _, e=e: backend.launch(e) for e in exs], rounds=5, min_time_s=0.15)
        print(f"{name} at " + ", ".join(f"{off}: {r.median_s * 1e6:.1f}" for off, r in zip(OFFSETS, m, strict=True)))


if __name__ == "__main__":
    main()
