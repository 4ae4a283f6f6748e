"""The loops of pass (b) in the KL log_target float16 0-d deferred transposed walk at 2^22 (the
chip table's config, looked up): each backward-jumping block range of the SCALAR_G build's asm that
holds a shuffle, its instructions counted by mnemonic (``-v``: listed too). Run from the
repository root (results/performance.md, section 111):

    PYTHONPATH=. python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/walk_parts/asm_pass_b.py

Not part of the package.
"""

from __future__ import annotations

import collections
import re
import sys
import warnings

import torch

from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout


def _loops(asm: str) -> list[list[str]]:
    """Each backward-jumping block range [label .. jump to label] that holds a shuffle."""
    lines = [ln.rstrip() for ln in asm.splitlines()]
    where = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"^(\.LBB\S+):", ln))}
    found = []
    for i, ln in enumerate(lines):
        m = re.match(r"^\s+j\w+\s+(\.LBB\S+)", ln)
        if m and m.group(1) in where and where[m.group(1)] < i:
            body = [
                x.strip()
                for x in lines[where[m.group(1)] : i + 1]
                if x.strip() and not x.strip().startswith(("#", "."))
            ]
            if any(s in x for x in body for s in ("unpck", "vperm", "vshuf")) and len(body) < 400:
                found.append(body)
    return found


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
                    for body in _loops("\n".join(fn.inspect_asm().values())):
                        ops = collections.Counter(x.split()[0] for x in body)
                        counts = ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1]))
                        print(f"## {key} loop of {len(body)}: {counts}")
                        if "-v" in sys.argv:
                            print("\n".join("   " + x for x in body))
                    return


if __name__ == "__main__":
    main()
