"""KL log_target's contiguous rows with the bfloat16 twin pick off and on (backends.cpu
checked_bf16_offered), in interleaved rounds in one process, beside torch's copy of the same
working set (timing.copy_probe), each row at the config the lookup gives it (the same for both
backends). Two backends, each with its own compiled loops: the pick off (the formula's narrow
loops, inline) and on (the narrow twin apart, with the raw flag); a float16 row, which takes the
narrow loops in both, as the A/B's own noise. Outputs bit for bit first. Run from the repository
root (results/performance.md, section 103):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/checked_bf16/ab.py 7 22 24 26

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
from tuner.problems import Case


def _backend(on: bool) -> CpuBackend:
    backend = CpuBackend()
    backend.checked_bf16 = on  # read at each plan's pick (_loop_set); its sets built on first use
    return backend


BACKENDS = {"off": _backend(False), "on": _backend(True)}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:]] or [22, 24, 26]
    print(f"# {rounds} interleaved rounds; median us (min-max of the rounds); on/off per round; % of the copy's time")
    rows = [(torch.bfloat16, k, red) for k in sizes for red in (Reduction.NONE, Reduction.MEAN)]
    rows.append((torch.float16, sizes[0], Reduction.MEAN))
    for dtype, k, red in rows:
        case = Case(Op.KL_DIV, dtype, (1 << k,), red, log_target=True)
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
        runs.append(copy)
        measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
        off, on, cp = measured
        ratios = [b / a for a, b in zip(off.medians, on.medians, strict=True)]
        roof = (
            [c * moved / copied / m for c, m in zip(cp.medians, off.medians, strict=True)],
            [c * moved / copied / m for c, m in zip(cp.medians, on.medians, strict=True)],
        )
        us = [[m * 1e6 for m in r.medians] for r in (off, on)]
        print(
            f"{case.label():40s} {' | '.join(sorted(configs)):32s}"
            f" off {off.median_s * 1e6:8.1f} ({spread(us[0], '.0f')})"
            f"  on {on.median_s * 1e6:8.1f} ({spread(us[1], '.0f')})"
            f"  on/off {statistics.median(ratios):.3f} ({spread(ratios, '.3f')})"
            f"  roofline off {statistics.median(roof[0]):.0%} on {statistics.median(roof[1]):.0%}"
            f"  copy {copied / cp.median_s / 1e9:.1f} GB/s",
            flush=True,
        )


if __name__ == "__main__":
    main()
