"""KL log_target's bfloat16 rows with the coarse pick off and on (backends.cpu.coarse_offered), in
interleaved rounds in one process, beside torch's copy of the same working set
(timing.copy_probe), each row at the config the lookup gives it (the same for both backends). Two
backends, each with its own compiled loops, both with the bfloat16 twin pick the Xeon takes
(checked_bf16_offered): off, the narrow formula (the contiguous loops through its twin apart with
the raw flag, the walks inline: the loops of 8301801); on, the coarse formula alike (the loops of
a30d2dc on this host). The two differ in bits where the degree-2 exp rounds otherwise: counted,
with the largest difference in bfloat16 ulps. Run from the repository root (results/performance.md,
section 104):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/coarse_bf16/ab.py 7 20 22 24 26

Not part of the package.
"""

from __future__ import annotations

import statistics
import sys

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from tuner.goals import spread
from tuner.problems import Case, InputLayout


def _backend(coarse: bool) -> CpuBackend:
    backend = CpuBackend()
    backend.checked_bf16 = True  # the Xeon's default (cpu._CHECKED_BF16_CPUS), whatever the host
    backend.coarse = coarse  # read at each plan's pick (_loop_set); its sets built on first use
    return backend


BACKENDS = {"off": _backend(False), "on": _backend(True)}


def _ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    """The largest distance of a's and b's bfloat16 patterns in ulps (sign-magnitude to a line)."""

    def line(v: torch.Tensor) -> torch.Tensor:
        bits = v.view(torch.int16).to(torch.int32)
        return torch.where(bits < 0, -(bits & 0x7FFF), bits)

    return int((line(a) - line(b)).abs().max())


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:]] or [20, 22, 24, 26]
    print(f"# {rounds} interleaved rounds; median us (min-max of the rounds); on/off per round; % of the copy's time")
    rows = [(InputLayout.CONTIGUOUS, k) for k in sizes]
    rows += [(layout, 22) for layout in (InputLayout.TRANSPOSED, InputLayout.BROADCAST)]
    for layout, k in rows:
        for red in (Reduction.NONE, Reduction.MEAN):
            case = Case(Op.KL_DIV, torch.bfloat16, (1 << k,), red, log_target=True, layout=layout)
            g, x, t = case.inputs("cpu")
            outs, runs, configs = [], [], set()
            for backend in BACKENDS.values():
                out = case.out_like(x)
                ex = case.phase_one(g, x, t, out, "cpu")
                backend.launch(ex)
                outs.append(out)
                configs.add(ex.config.short())
                runs.append(lambda _, ex=ex, backend=backend: backend.launch(ex))
            differ = int((outs[0].view(torch.int16) != outs[1].view(torch.int16)).sum())
            moved = timing.bytes_moved([g, t], outs[0])
            copy, copied = timing.copy_probe("cpu", moved)
            runs.append(copy)
            off, on, cp = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
            ratios = [b / a for a, b in zip(off.medians, on.medians, strict=True)]
            roof = [
                statistics.median(c * moved / copied / m for c, m in zip(cp.medians, r.medians, strict=True))
                for r in (off, on)
            ]
            us = [[m * 1e6 for m in r.medians] for r in (off, on)]
            print(
                f"{case.label():47s} {' | '.join(sorted(configs)):42s}"
                f" off {off.median_s * 1e6:8.1f} ({spread(us[0], '.0f')})"
                f"  on {on.median_s * 1e6:8.1f} ({spread(us[1], '.0f')})"
                f"  on/off {statistics.median(ratios):.3f} ({spread(ratios, '.3f')})"
                f"  roofline off {roof[0]:.0%} on {roof[1]:.0%}"
                f"  copy {copied / cp.median_s / 1e9:.1f} GB/s"
                f"  differ {differ / outs[0].numel():.1%} (<= {_ulps(outs[0], outs[1])} ulp)",
                flush=True,
            )


if __name__ == "__main__":
    main()
