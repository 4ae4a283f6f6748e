"""KL log_target's bfloat16 walks with a 0-d gradient (and, beside them, a full one), with the walks'
twin pick off and on (backends.cpu.CpuBackend.checked_walks), in interleaved rounds in one process.
Two backends, each with its own compiled loops, both with the Xeon's contiguous picks
(checked_bf16, coarse): off, the walks run the coarse formula as they did at 5b15610; on, a walk
with a 0-d gradient takes the coarse twin's set (its unit-stride runs of cpu_loops._APART_RUN and
more apart, through the twin with the raw flag and normal_run's store). A walk with a full gradient
keeps its loops whatever the pick, so its two rows are the same loops (a control). Each row at the
config the lookup gives it; for a transposed row whose config defers out's stores (Tiling.defer_out,
a walk that runs the formula inline) the shipped order of the same config too. Every output's bits
are compared with the first's. Run from the repository root (results/performance.md, section 105):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/walks_twin/ab.py 7 12 16 18 20 22 24 26

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
from kernels.modes import Op, Reduction
from tuner.goals import spread
from tuner.problems import Case, InputLayout


def _backend(walks: bool) -> CpuBackend:
    backend = CpuBackend()
    backend.checked_bf16 = backend.coarse = True  # the Xeon's defaults, whatever the host
    backend.checked_walks = walks
    return backend


BACKENDS = (_backend(False), _backend(True))


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:]] or [16, 20, 22, 24]
    print(f"# {rounds} interleaved rounds; median us; on/off per round: median (min-max of the rounds)")
    for k in sizes:
        for layout in (InputLayout.BROADCAST, InputLayout.TRANSPOSED):
            for red in (Reduction.NONE, Reduction.MEAN):
                case = Case(Op.KL_DIV, torch.bfloat16, (1 << k,), red, log_target=True, layout=layout)
                g, x, t = case.inputs("cpu")
                shipped = case.phase_one(g, x, t, case.out_like(x), "cpu").config
                configs = [shipped] + [dataclasses.replace(shipped, defer_out=False)] * shipped.defer_out
                runs, outs = [], []
                for config in configs:
                    for backend in BACKENDS:
                        out = case.out_like(x)
                        ex = dataclasses.replace(case.phase_one(g, x, t, out, "cpu"), config=config)
                        backend.launch(ex)
                        outs.append(out)
                        runs.append(lambda _, ex=ex, backend=backend: backend.launch(ex))
                same = all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs)
                res = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
                parts = [f"{case.label():46s} bits {'equal' if same else 'DIFFER'}"]
                for config, off, on in zip(configs, res[::2], res[1::2], strict=True):
                    ratios = [b / a for a, b in zip(off.medians, on.medians, strict=True)]
                    parts.append(
                        f"[{config.short()}] off {off.median_s * 1e6:.1f} on {on.median_s * 1e6:.1f}"
                        f" on/off {statistics.median(ratios):.3f} ({spread(ratios, '.3f')})"
                    )
                print("  ".join(parts), flush=True)


if __name__ == "__main__":
    main()
