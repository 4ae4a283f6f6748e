"""Section 60 of results/performance.md: KL log_target's contiguous loops on a host without AVX-512F
take the formulas' checked twins (Formula.checked_value, narrow_checked_value): the scale by 2^k in
one power of two (scalar.ldexp_checked) where ldexp is three, a tile redone with the formula where a
flag says k left [-126, 127]. Same config and bits either way.

For each dtype whose loops take a twin (float32, bfloat16; a float16 out of a float16 gradient takes
the half formula, which has none), size and gradient kind (none: full, mean: 0-d), in interleaved
rounds in one process: the call with the formula's own loops (``plain``: the formula without its
twins, named apart so that the backend builds its loops apart), with the twins' (``checked``), and
the size-matched torch copy (the report's roofline); medians (us), each side's roofline % and the
per-round ratio checked / plain; then float32 with 0.1% of the targets -inf, where nearly every tile
holds a flagged element. Both outputs are compared bit for bit first. Not part of the
package: run by hand, as

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/checked_scale.py 24 5
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import sys

import torch

from kernels import backends, timing
from kernels.backends import cpu_loops
from kernels.modes import Op, Reduction
from kernels.ops import kl_div
from tuner.problems import Case

PLAIN = dataclasses.replace(
    kl_div.FORMULA_LOG, name="kl_div_log_plain_scale", checked_value=None, narrow_checked_value=None
)


def row(dtype: torch.dtype, n: int, reduction: Reduction, rounds: int, minus_inf: float = 0.0) -> None:
    """``minus_inf``: that fraction of the targets set to -inf (the log of a zero probability), at
    random places: nearly every tile then holds a flagged element."""
    cpu = backends.get("cpu")
    case = Case(Op.KL_DIV, dtype, (n,), reduction, log_target=True)
    g, x, t = case.inputs("cpu")
    if minus_inf:
        where = torch.randperm(n, generator=torch.Generator().manual_seed(1))[: int(minus_inf * n)]
        t[where] = -math.inf
    outs = [case.out_like(x), case.out_like(x)]
    checked = case.phase_one(g, x, t, outs[1], "cpu")
    plain = dataclasses.replace(case.phase_one(g, x, t, outs[0], "cpu"), formula=PLAIN)
    cpu.launch(plain)
    cpu.launch(checked)
    view = torch.int32 if dtype is torch.float32 else torch.int16
    assert torch.equal(outs[0].view(view), outs[1].view(view)), "the two builds' bits differ"
    nbytes = timing.bytes_moved(case.read_tensors(g, x, t), outs[0])
    copy, copy_bytes = timing.copy_probe("cpu", nbytes)
    runs = [lambda _: cpu.launch(plain), lambda _: cpu.launch(checked), copy]
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    ratios = [a / b for a, b in zip(measured[1].medians, measured[0].medians, strict=True)]

    def roofline(i: int) -> float:
        rounds_i = zip(measured[i].medians, measured[2].medians, strict=True)
        per_round = [(nbytes / k) / (copy_bytes / c) for k, c in rounds_i]
        return 100 * statistics.median(per_round)

    grad = ("0-d" if reduction is Reduction.MEAN else "full") + (f", {minus_inf:.1%} -inf" if minus_inf else "")
    print(
        f"| {str(dtype).removeprefix('torch.')} | 2^{n.bit_length() - 1} | {grad} | {checked.config.short()} "
        f"| {measured[0].median_s * 1e6:.0f} | {measured[1].median_s * 1e6:.0f} "
        f"| {roofline(0):.0f}% | {roofline(1):.0f}% "
        f"| {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |",
        flush=True,
    )


def main() -> None:
    top, rounds = int(sys.argv[1]), int(sys.argv[2])
    sizes = [int(a) for a in sys.argv[3:]] or list(range(16, top + 1, 4))
    print(f"# CHECKED_SCALE={cpu_loops.CHECKED_SCALE} (twins built: no AVX-512F), {rounds} rounds")
    head = "| dtype | n | grad | config | plain us | checked us | plain roofline | checked roofline |"
    print(head + " checked / plain (min-max) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dtype in (torch.float32, torch.bfloat16):
        for reduction in (Reduction.NONE, Reduction.MEAN):
            for k in sizes:
                row(dtype, 1 << k, reduction, rounds)
    # Targets with -inf scattered through them: the tiles after a flagged one skip the twin.
    for reduction in (Reduction.NONE, Reduction.MEAN):
        for k in sizes:
            row(torch.float32, 1 << k, reduction, rounds, minus_inf=0.001)


if __name__ == "__main__":
    main()
