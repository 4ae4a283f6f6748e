"""The roofline's yardstick at the L3's edge: a 16-bit 0-d row at 2^24 moves 64 MiB (t read, out
written), so its copy (torch copy_ of two 32 MiB float32 buffers) is this host's whole 32 MiB L3
per side. Time, in interleaved rounds of one process: each row's tuned kernel, the copy the report
pairs with it, and the copy of a working set 4x the size (out of the L3), and print each one's GB/s
per round, so the swing of the yardstick reads apart from the kernel's.

    .venv/bin/python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/copy_yardstick.py [ROUNDS]
"""

from __future__ import annotations

import statistics
import sys

import torch

from kernels import backends, timing
from kernels.modes import Op, Reduction
from tuner.problems import Case

ROWS = [
    Case(Op.KL_DIV, torch.bfloat16, (2**24,), Reduction.MEAN),
    Case(Op.KL_DIV, torch.bfloat16, (2**24,), Reduction.MEAN, log_target=True),
    Case(Op.L1, torch.bfloat16, (2**24,), Reduction.MEAN),
]


LAUNCH = backends.get("cpu").launch


def gbps(nbytes: int, seconds: tuple[float, ...]) -> str:
    rates = [nbytes / s / 1e9 for s in seconds]
    return f"{statistics.median(rates):6.1f} GB/s (rounds {min(rates):.1f}-{max(rates):.1f})"


def main(rounds: int) -> None:
    for case in ROWS:
        g, x, t = case.inputs("cpu")
        out = case.out_like(x)
        ex = case.phase_one(g, x, t, out, "cpu")
        nbytes = timing.bytes_moved(case.read_tensors(g, x, t), out)
        copy, copy_bytes = timing.copy_probe("cpu", nbytes)
        big, big_bytes = timing.copy_probe("cpu", 4 * nbytes)
        runs = [lambda _, ex=ex: LAUNCH(ex), copy, big]
        timed = timing.interleaved(runs, rounds=rounds, min_time_s=0.1)
        kernel, pair, far = (r.medians for r in timed)
        pct = [100 * (nbytes / k) / (copy_bytes / c) for k, c in zip(kernel, pair, strict=True)]
        pct_far = [100 * (nbytes / k) / (big_bytes / c) for k, c in zip(kernel, far, strict=True)]
        print(f"{case.label()} {ex.config.short()}, {nbytes >> 20} MiB moved, {rounds} rounds", flush=True)
        print(f"  kernel              {gbps(nbytes, kernel)}")
        print(f"  copy, same bytes    {gbps(copy_bytes, pair)}")
        print(f"  copy, 4x the bytes  {gbps(big_bytes, far)}")
        print(
            f"  % of the copy beside it: {statistics.median(pct):.0f} ({min(pct):.0f}-{max(pct):.0f});"
            f" of the 4x copy: {statistics.median(pct_far):.0f} ({min(pct_far):.0f}-{max(pct_far):.0f})",
            flush=True,
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
