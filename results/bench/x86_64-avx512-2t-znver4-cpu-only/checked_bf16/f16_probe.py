"""A probe: KL log_target's float16 contiguous rows through the set the bfloat16 pick takes (the
narrow twin, apart, with the raw flag), against the narrow loops inline as the Zen 4 ships them, in
interleaved rounds in one process beside torch's copy of the same working set, each row at its
table config. The second backend overrides ``_loop_set`` for float16 outs of the flat and
scalar_grad loops alone; the package has no such pick. Outputs bit for bit first. Run from the
repository root (results/performance.md, section 112):

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/checked_bf16/f16_probe.py 7 22 24 26

Not part of the package.
"""

from __future__ import annotations

import statistics
import sys

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Variant
from tuner.goals import spread
from tuner.problems import Case


class Float16Twin(CpuBackend):
    """The backend, but a float16 out of the contiguous loops takes the bfloat16 pick's set."""

    def _loop_set(self, ex):  # noqa: ANN001, ANN202 - a probe's override
        loops, pick = super()._loop_set(ex)
        contiguous = ex.config.variant in (Variant.FLAT, Variant.SCALAR_GRAD)
        if contiguous and ex.out.dtype is torch.float16 and ex.config.variant is not Variant.REDUCE:
            loops = self.kernels(ex.formula, True, checked_bf16=True)
        return loops, pick


BACKENDS = {"off": CpuBackend(), "on": Float16Twin()}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:]] or [22, 24, 26]
    print(f"# {rounds} interleaved rounds; median us (min-max of the rounds); on/off per round; % of the copy's time")
    for k in sizes:
        for red in (Reduction.NONE, Reduction.MEAN):
            case = Case(Op.KL_DIV, torch.float16, (1 << k,), red, log_target=True)
            g, x, t = case.inputs("cpu")
            outs, runs, configs = [], [], set()
            for backend in BACKENDS.values():
                out = case.out_like(x)
                ex = case.phase_one(g, x, t, out, "cpu")
                backend.launch(ex)
                outs.append(out)
                configs.add(ex.config.short())
                runs.append(lambda _, ex=ex, backend=backend: backend.launch(ex))
            assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the bits differ"
            moved = timing.bytes_moved([g, t], outs[0])
            copy, copied = timing.copy_probe("cpu", moved)
            grain = timing.Grain.LAUNCH if k >= 24 else timing.Grain.RUN
            off, on, cp = timing.interleaved([*runs, copy], rounds=rounds, min_time_s=0.15, grain=grain)
            ratios = [b / a for a, b in zip(off.medians, on.medians, strict=True)]
            roof = [[c * moved / copied / m for c, m in zip(cp.medians, r.medians, strict=True)] for r in (off, on)]
            us = [[m * 1e6 for m in r.medians] for r in (off, on)]
            print(
                f"{case.label():34s} {' | '.join(sorted(configs)):32s}"
                f" off {off.median_s * 1e6:8.1f} ({spread(us[0], '.0f')})"
                f"  on {on.median_s * 1e6:8.1f} ({spread(us[1], '.0f')})"
                f"  on/off {statistics.median(ratios):.3f} ({spread(ratios, '.3f')})"
                f"  roofline off {statistics.median(roof[0]):.0%} on {statistics.median(roof[1]):.0%}"
                f"  copy {copied / cp.median_s / 1e9:.1f} GB/s",
                flush=True,
            )


if __name__ == "__main__":
    main()
