"""KL log_target's bfloat16 transposed walk in its deferred order (Tiling.defer_out) with the whole
tiles' twin off and on (backends.cpu.CpuBackend.deferred_twin), in interleaved rounds in one process.
Two backends, each with its own compiled loops, both with the Xeon's picks (checked_bf16, coarse,
checked_walks): off, the deferred walk's pass (a) runs the coarse formula inline, as at 28dd467; on,
its whole dense tiles with a 0-d gradient run the coarse twin inline (normal_run's loop, the held
rows stored between its pieces). A full gradient keeps the formula's pieces whatever the switch, so
its row is the same loop twice (a control). Each row at the chip table's transposed config (strided,
tile 4096, 2 cores, 32-byte rows, deferred; streamed from 2^20 up), whatever the lookup says, so
that every size times the order the switch moves. Every output's bits are compared with the
first's. Run from the repository root (results/performance.md, section 106):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/deferred_twin/ab.py 7 12 16 18 20 22 24 26

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


def _backend(twin: bool) -> CpuBackend:
    backend = CpuBackend()
    backend.checked_bf16 = backend.coarse = backend.checked_walks = True  # the Xeon's, whatever the host
    backend.deferred_twin = twin  # read when the sets are built: before the first launch
    return backend


BACKENDS = (_backend(False), _backend(True))


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:]] or [16, 20, 22, 24]
    print(f"# {rounds} interleaved rounds; median us; on/off per round: median (min-max of the rounds)")
    for k in sizes:
        config = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, stream=k >= 20, transpose_row=32, defer_out=True)
        for red in (Reduction.MEAN, Reduction.NONE):
            case = Case(Op.KL_DIV, torch.bfloat16, (1 << k,), red, log_target=True, layout=InputLayout.TRANSPOSED)
            g, x, t = case.inputs("cpu")
            runs, outs = [], []
            for backend in BACKENDS:
                out = case.out_like(x)
                ex = dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config)
                backend.launch(ex)
                outs.append(out)
                runs.append(lambda _, ex=ex, backend=backend: backend.launch(ex))
            same = all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs)
            off, on = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
            ratios = [b / a for a, b in zip(off.medians, on.medians, strict=True)]
            print(
                f"{case.label():46s} bits {'equal' if same else 'DIFFER'}  [{config.short()}]"
                f" off {off.median_s * 1e6:.1f} on {on.median_s * 1e6:.1f}"
                f" on/off {statistics.median(ratios):.3f} ({spread(ratios, '.3f')})",
                flush=True,
            )


if __name__ == "__main__":
    main()
