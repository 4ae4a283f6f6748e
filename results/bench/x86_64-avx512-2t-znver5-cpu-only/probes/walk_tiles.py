"""Taller transposed-walk tiles on the Zen 5's half rows (results/performance.md, section 65).

The Zen 5 took half-line register rows in its 16-bit transposed entries (section 65), but a host
whose rows are whole lines is offered one tile (cpu_loops.TRANSPOSED_TILES: 16 KiB), where hosts
with half-line rows (AVX2) are offered 16 KiB, 64 KiB and 128 KiB. With
``LOSSTUNE_CPU_TRANSPOSE_BYTES=32`` this host's own rows are half lines (the same register
transposes as ``transpose_row=32``: two stacked blocks fill each output line) and the three tiles
are offered, so one process can time them:

    LOSSTUNE_CPU_TRANSPOSE_BYTES=32 \\
        python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/walk_tiles.py 7

For each transposed row at 2^22 that section 65's report missed and the 16-bit rows beside them:
the shipped config (the Zen 5 table's, its rows the host's own here) against the same config at
each taller tile, interleaved with the contiguous partner, through ``walk_knobs.row``. Outputs bit
for bit first. Not part of the package.
"""

from __future__ import annotations

import dataclasses
import pathlib
import sys

import torch

from kernels.backends import cpu_loops
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from walk_knobs import SHIPPED, configs, row  # noqa: E402  (a probe beside this one)

N = 1 << 22
ROWS = (
    (Op.MSE, False, torch.float16),
    (Op.MSE, False, torch.bfloat16),
    (Op.KL_DIV, False, torch.float32),
    (Op.KL_DIV, False, torch.float16),
    (Op.KL_DIV, False, torch.bfloat16),
    (Op.KL_DIV, True, torch.float32),
)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    assert cpu_loops.TRANSPOSE_BYTES == 32 and len(cpu_loops.TRANSPOSED_TILES) > 1, (
        "run with LOSSTUNE_CPU_TRANSPOSE_BYTES=32"
    )
    shipped = configs(SHIPPED)
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds, 0-d gradient; 'shipped' at tile 4096")
    print(
        "| op | dtype | grad | taller config | tile 4096 us | taller us | contiguous us "
        "| 4096 / contiguous | taller / contiguous |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for op, log, dtype in ROWS:
        case = Case(op, dtype, (N,), Reduction.MEAN, log_target=log, layout=InputLayout.TRANSPOSED)
        # This process's own rows are the half lines the table's transpose_row=32 names.
        base = dataclasses.replace(shipped[case.label()], transpose_row=0)
        for tile in cpu_loops.TRANSPOSED_TILES[1:]:
            row(case, base, dataclasses.replace(base, tile=tile), rounds)


if __name__ == "__main__":
    main()
