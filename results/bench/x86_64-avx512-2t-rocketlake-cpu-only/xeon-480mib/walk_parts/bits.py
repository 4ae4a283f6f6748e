"""The deferred transposed walk's output for KL log_target float16 (0-d by mean and by sum, 2^13,
2^16, 2^20 and 2^22; streamed and ordinary stores) against the contiguous loop on the same values
(t.contiguous()), every bit: prints equal or DIFFER per row. With prototype.diff applied,
LOSSTUNE_PROBE picks the variant (parts.py); 1 (no transposes) must print DIFFER, the check's own
check. Run as below (results/performance.md, section 111):

    cd results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/walk_parts
    LOSSTUNE_PROBE=32 PYTHONPATH=../../../../.. python bits.py

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import warnings

import torch

from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.problems import Case, InputLayout


def main() -> None:
    warnings.simplefilter("ignore")
    backend = CpuBackend()
    for k in (13, 16, 20, 22):
        for red in (Reduction.MEAN, Reduction.SUM):
            case = Case(Op.KL_DIV, torch.float16, (1 << k,), red, log_target=True, layout=InputLayout.TRANSPOSED)
            flat = Case(Op.KL_DIV, torch.float16, (1 << k,), red, log_target=True)
            g, x, t = case.inputs("cpu")
            ref = flat.out_like(x)
            one = Tiling(tile=256, cores=1, variant=Variant.SCALAR_GRAD)
            backend.launch(
                dataclasses.replace(flat.phase_one(g, x.contiguous(), t.contiguous(), ref, "cpu"), config=one)
            )
            for stream in (True, False):
                out = case.out_like(x)
                config = Tiling(
                    tile=4096, cores=2, variant=Variant.STRIDED, stream=stream, transpose_row=32, defer_out=True
                )
                backend.launch(dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config))
                same = torch.equal(out.view(torch.int16), ref.view(torch.int16))
                print(f"2^{k} {red.name.lower()} stream={stream} {'equal' if same else 'DIFFER'}", flush=True)


if __name__ == "__main__":
    main()
