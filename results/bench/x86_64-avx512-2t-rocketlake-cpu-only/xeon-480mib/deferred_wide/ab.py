"""The transposed walk into a float32 out, in the shipped order and in the deferred one
(Tiling.defer_out, the held tile's out rows stored between the next tile's pass-(a) pieces), for
every op and KL mode, full and 0-d gradients, in interleaved rounds in one process with the row's
contiguous partner (its own looked-up config). Four configs a row: strided, tile 4096, 2 cores,
streamed, whole (0) or half (32-byte) register rows, without and with defer_out. Every output's
bits are compared with the first's. The deferred walk is asked of the backend whatever its space
offers (CpuBackend.launch takes the config as given). Run from the repository root
(results/performance.md, section 107):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/deferred_wide/ab.py 7 20 21 22

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import warnings

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout

OPS = (("mse", Op.MSE, False), ("l1", Op.L1, False), ("kl_div", Op.KL_DIV, False), ("kl_div-log", Op.KL_DIV, True))


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:]] or [22]
    backend = CpuBackend()
    print(f"# {rounds} interleaved rounds; median us, and over the contiguous partner per round: median (min-max)")
    for k in sizes:
        for name, op, log_target in OPS:
            for red in (Reduction.NONE, Reduction.MEAN):
                case = Case(op, torch.float32, (1 << k,), red, log_target=log_target, layout=InputLayout.TRANSPOSED)
                g, x, t = case.inputs("cpu")
                runs, outs, labels = [], [], []
                for row in (0, 32):
                    for defer in (False, True):
                        config = Tiling(
                            tile=4096, cores=2, variant=Variant.STRIDED, stream=True, transpose_row=row, defer_out=defer
                        )
                        out = case.out_like(x)
                        ex = dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config)
                        backend.launch(ex)
                        outs.append(out)
                        labels.append(f"row{row}{'-deferred' if defer else ''}")
                        runs.append(lambda _, ex=ex: backend.launch(ex))
                partner = Case(op, torch.float32, (1 << k,), red, log_target=log_target)
                pg, px, pt = partner.inputs("cpu")
                pex = partner.phase_one(pg, px, pt, partner.out_like(px), "cpu")
                backend.launch(pex)
                runs.append(lambda _, ex=pex: backend.launch(ex))
                same = all(torch.equal(outs[0].view(torch.int32), o.view(torch.int32)) for o in outs)
                *walks, contiguous = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
                grad = "0-d" if red is Reduction.MEAN else "full"
                line = f"{name:10s} {grad:4s} 2^{k}  bits {'equal' if same else 'DIFFER'}"
                for label, walk in zip(labels, walks, strict=True):
                    ratios = [a / b for a, b in zip(walk.medians, contiguous.medians, strict=True)]
                    ratio = f"{statistics.median(ratios):.2f} ({spread(ratios, '.2f')})"
                    line += f" | {label} {walk.median_s * 1e6:.0f} {ratio}"
                print(f"{line} | contiguous {contiguous.median_s * 1e6:.0f} [{pex.config.short()}]", flush=True)


if __name__ == "__main__":
    main()
