"""Section 59 of results/performance.md: KL log_target's float16 outputs of a float16 gradient take
Formula.half_value, whose scale by 2^k is one clamped power of two (scalar.ldexp_half) where the
narrow formula's ldexp is three on a host without AVX-512F. Same walk, config and bits either way.

For each layout (contiguous at 2^n, the report's transposed view at 2^22) and gradient kind (none:
full, mean: 0-d), in interleaved rounds in one process: the call with the narrow formula's loops
(``narrow``: the formula as it was, named apart so that the backend builds its loops apart) and
with the half formula's (``half``), each on the config this host's table picks; medians (us) and
the per-round ratio over ``narrow``. Both outputs are compared bit for bit first. Not part of the
package: run by hand, as

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/half_scale.py 24 7
"""

from __future__ import annotations

import dataclasses
import statistics
import sys

import torch

from kernels import backends, timing
from kernels.backends import cpu_loops
from kernels.modes import Op, Reduction
from kernels.ops import kl_div
from tuner.problems import Case, InputLayout


def row(n: int, reduction: Reduction, layout: InputLayout, rounds: int) -> None:
    cpu = backends.get("cpu")
    case = Case(Op.KL_DIV, torch.float16, (n,), reduction, log_target=True, layout=layout)
    g, x, t = case.inputs("cpu")
    outs = [case.out_like(x), case.out_like(x)]
    half = case.phase_one(g, x, t, outs[1], "cpu")
    assert half.formula is kl_div.FORMULA_LOG and g.dtype is torch.float16
    narrow_formula = dataclasses.replace(kl_div.FORMULA_LOG, name="kl_div_log_narrow_scale", half_value=None)
    narrow = dataclasses.replace(case.phase_one(g, x, t, outs[0], "cpu"), formula=narrow_formula)
    cpu.launch(narrow)
    cpu.launch(half)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the two formulas' bits differ"
    runs = [lambda _: cpu.launch(narrow), lambda _: cpu.launch(half)]
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    ratios = [a / b for a, b in zip(measured[1].medians, measured[0].medians, strict=True)]
    grad = "0-d" if reduction is Reduction.MEAN else "full"
    print(
        f"| {layout.value} | 2^{n.bit_length() - 1} | {grad} | {half.config.short()} "
        f"| {measured[0].median_s * 1e6:.0f} | {measured[1].median_s * 1e6:.0f} "
        f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |",
        flush=True,
    )


def main() -> None:
    top, rounds = int(sys.argv[1]), int(sys.argv[2])
    print(f"# HALF_SCALE={cpu_loops.HALF_SCALE} (one-power scale built: no AVX-512F), {rounds} rounds")
    print("| layout | n | grad | config | narrow us | half us | half / narrow (min-max) |")
    print("|---|---|---|---|---|---|---|")
    for reduction in (Reduction.NONE, Reduction.MEAN):
        for k in range(16, top + 1, 2):
            row(1 << k, reduction, InputLayout.CONTIGUOUS, rounds)
        row(1 << 22, reduction, InputLayout.TRANSPOSED, rounds)


if __name__ == "__main__":
    main()
