"""The vector loops of KL log_target float16 0-d at 2^22 (the chip table's configs, given as in
parts.py, so a build with a prototype applied runs them too),
counted by mnemonic (``-v``: listed too), from numba's asm: each backward-jumping block range of
under 400 instructions (bf16_exp/asm.py's vector_loops) that holds a shuffle, in the deferred
transposed walk's build (the first compiled: SCALAR_G), pass (b)'s; or with ``--exp``, that holds the
exp's vscalefps, in that build (pass (a)) and in the contiguous loop's (scalar_grad). With
prototype.diff applied, LOSSTUNE_PROBE=16 gives the paired pass (b)'s loops. Run from the
repository root (results/performance.md, section 111):

    PYTHONPATH=. python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/walk_parts/asm_walk.py

Not part of the package.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import warnings
from pathlib import Path

import torch

from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout

# bf16_exp/asm.py's loop finder (its directory on the path for its own sibling import, loops.py)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bf16_exp"))
from asm import vector_loops  # noqa: E402


def _print(label: str, fn, marks: tuple[str, ...]) -> None:
    for body in vector_loops("\n".join(fn.inspect_asm().values()), marks):
        ops = collections.Counter(x.split()[0] for x in body)
        counts = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1]))
        print(f"## {label} loop of {len(body)}: {counts}")
        if "-v" in sys.argv:
            print("\n".join("   " + x for x in body))


def main() -> None:
    warnings.simplefilter("ignore")
    exp = "--exp" in sys.argv
    backend = CpuBackend()
    configs = {
        InputLayout.CONTIGUOUS: Tiling(tile=256, cores=2, variant=Variant.SCALAR_GRAD, prefetch=2),
        InputLayout.TRANSPOSED: Tiling(
            tile=4096, cores=2, variant=Variant.STRIDED, stream=True, transpose_row=32, defer_out=True
        ),
    }
    for layout, config in configs.items():
        if layout is InputLayout.CONTIGUOUS and not exp:
            continue
        case = Case(Op.KL_DIV, torch.float16, (1 << 22,), Reduction.MEAN, log_target=True, layout=layout)
        g, x, t = case.inputs("cpu")
        ex = dataclasses.replace(case.phase_one(g, x, t, case.out_like(x), "cpu"), config=config)
        backend.launch(ex)
        print(f"{case.label()}: {ex.config.short()}")
    marks = ("vscalefps",) if exp else ("unpck", "vperm", "vshuf")
    for sets in backend._kernels.values():
        for kernels in sets:
            if exp:
                for fn in kernels.scalar_grad:
                    if fn.signatures:
                        _print("scalar_grad", fn, marks)
            for key, pair in kernels.transposed_deferred.items():
                for fn in pair:
                    if fn.signatures:
                        _print(f"deferred {key}", fn, marks)
                        return


if __name__ == "__main__":
    main()
