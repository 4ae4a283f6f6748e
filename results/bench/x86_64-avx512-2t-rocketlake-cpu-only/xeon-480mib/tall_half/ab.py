"""The transposed walk's tile height with half (32-byte) register rows on the Xeon: its table's
config (strided, tile 4096, 2 cores, streamed, half rows, deferred stores or inputs first) against
the same config with taller tiles (8192, 16384 and 32768 words of out buffer: 256, 512 and 1024
rows of a 16-bit type), for every op and KL mode, 16-bit dtypes, full and 0-d gradients, at 2^22,
in interleaved rounds in one process with the row's contiguous partner. On a host with whole-line
rows the space offers tile 4096 alone (cpu_loops.TRANSPOSED_TILES), measured on whole rows only
(sections 17 and 23); the AVX2 host's half rows gained from taller tiles (section 31). The probe
widens TRANSPOSED_TILES before the walks compile. Every output's bits are compared with the
table config's. Run from the repository root (results/performance.md, section 108):

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/xeon-480mib/tall_half/ab.py \
        7 22 [op ...] [tiles=8192,16384,32768]

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import warnings

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.modes import Op, Reduction
from tuner.goals import spread
from tuner.problems import Case, InputLayout

# The heights tried beside the table's: taller by default, or as given (``tiles=1024,2048``).
TALL = next(
    (tuple(int(t) for t in a[6:].split(",")) for a in sys.argv[1:] if a.startswith("tiles=")), (8192, 16384, 32768)
)
cpu_loops.TRANSPOSED_TILES = (*cpu_loops.TRANSPOSED_TILES, *TALL)

from kernels.backends.cpu import CpuBackend  # noqa: E402  (after the widening: it reads the tiles)

OPS = (("mse", Op.MSE, False), ("l1", Op.L1, False), ("kl_div", Op.KL_DIV, False), ("kl_div-log", Op.KL_DIV, True))


def main() -> None:
    warnings.simplefilter("ignore")  # a table entry another host reads, skipped: not this script's
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sizes = [int(k) for k in sys.argv[2:] if k.isdigit()] or [22]
    only = {s for s in sys.argv[1:] if not s.isdigit() and not s.startswith("tiles=")}
    backend = CpuBackend()
    print(f"# {rounds} interleaved rounds; median us, and over the contiguous partner per round: median (min-max)")
    for k in sizes:
        for name, op, log_target in OPS:
            if only and name not in only:
                continue
            for dtype in (torch.float16, torch.bfloat16):
                for red in (Reduction.NONE, Reduction.MEAN):
                    case = Case(op, dtype, (1 << k,), red, log_target=log_target, layout=InputLayout.TRANSPOSED)
                    g, x, t = case.inputs("cpu")
                    table = case.phase_one(g, x, t, case.out_like(x), "cpu")
                    exs = [table] + [
                        dataclasses.replace(
                            case.phase_one(g, x, t, case.out_like(x), "cpu"),
                            config=dataclasses.replace(table.config, tile=tile),
                        )
                        for tile in TALL
                    ]
                    for ex in exs:
                        backend.launch(ex)
                    same = all(torch.equal(exs[0].out.view(torch.int16), ex.out.view(torch.int16)) for ex in exs)
                    partner = Case(op, dtype, (1 << k,), red, log_target=log_target)
                    pg, px, pt = partner.inputs("cpu")
                    pex = partner.phase_one(pg, px, pt, partner.out_like(px), "cpu")
                    backend.launch(pex)
                    runs = [lambda _, ex=ex: backend.launch(ex) for ex in exs]
                    runs.append(lambda _, ex=pex: backend.launch(ex))
                    *walks, contiguous = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
                    grad = "0-d" if red is Reduction.MEAN else "full"
                    line = f"{name:10s} {str(dtype)[6:]:8s} {grad:4s} 2^{k} bits {'equal' if same else 'DIFFER'}"
                    line += f" [{table.config.short()}]"
                    for tile, walk in zip((4096, *TALL), walks, strict=True):
                        ratios = [a / b for a, b in zip(walk.medians, contiguous.medians, strict=True)]
                        ratio = f"{statistics.median(ratios):.2f} ({spread(ratios, '.2f')})"
                        line += f" | {tile} {walk.median_s * 1e6:.0f} {ratio}"
                    print(f"{line} | contiguous {contiguous.median_s * 1e6:.0f}", flush=True)


if __name__ == "__main__":
    main()
