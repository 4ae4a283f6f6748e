"""The loops of pass (b) in the KL log_target float16 0-d deferred transposed walk at 2^22 (the
chip table's config, looked up): each backward-jumping block range of the SCALAR_G build's asm that
holds a shuffle, its instructions counted by mnemonic (``-v``: listed too). Run from the
repository root (results/performance.md, section 111):

    PYTHONPATH=. python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/walk_parts/asm_pass_b.py

Not part of the package.
"""

from __future__ import annotations

import collections
import sys
import warnings
from pathlib import Path

import torch

from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout

# bf16_exp/asm.py's loop finder (its directory on the path for its own sibling import, loops.py)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bf16_exp"))
from asm import vector_loops  # noqa: E402


def main() -> None:
    warnings.simplefilter("ignore")
    backend = CpuBackend()
    case = Case(Op.KL_DIV, torch.float16, (1 << 22,), Reduction.MEAN, log_target=True, layout=InputLayout.TRANSPOSED)
    g, x, t = case.inputs("cpu")
    ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
    backend.launch(ex)
    config: Tiling = ex.config
    print(config.short())
    for sets in backend._kernels.values():
        for kernels in sets:
            for key, pair in kernels.transposed_deferred.items():
                for fn in pair:
                    if not fn.signatures:
                        continue
                    for body in vector_loops("\n".join(fn.inspect_asm().values()), ("unpck", "vperm", "vshuf")):
                        ops = collections.Counter(x.split()[0] for x in body)
                        counts = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1]))
                        print(f"## {key} loop of {len(body)}: {counts}")
                        if "-v" in sys.argv:
                            print("\n".join("   " + x for x in body))
                    return


if __name__ == "__main__":
    main()
