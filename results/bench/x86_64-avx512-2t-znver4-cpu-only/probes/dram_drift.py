"""Probe (performance.md section 42): does the streamed transposed walk's time follow this host's
DRAM bandwidth? One process for MINUTES: each pass times, in interleaved rounds, l1 float16 at 2^22
(full and 0-d gradient) contiguous, transposed with the table's config, transposed with the same
config's ordinary stores, and a copy of 2^26 float32 (512 MiB moved: DRAM), and prints a line of
medians (us). Evidence run by hand, not part of the package.

    python dram_drift.py MINUTES > dram_drift.txt
"""

from __future__ import annotations

import dataclasses
import sys
import time

import torch

from kernels import backends, timing
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout


def main() -> None:
    be = backends.get("cpu")
    minutes, n = float(sys.argv[1]), 1 << 22
    runs, names = [], []
    for reduction in (Reduction.NONE, Reduction.MEAN):
        plain = Case(Op.L1, torch.float16, (n,), reduction)
        g, x, t = plain.inputs("cpu")
        contiguous = plain.phase_one(g, x, t, plain.out_like(x), "cpu")
        case = dataclasses.replace(plain, layout=InputLayout.TRANSPOSED)
        tg, tx, tt = case.inputs("cpu")
        tuned = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu")
        ordinary = dataclasses.replace(tuned.config, stream=False)
        plain_stores = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu", config=ordinary)
        for name, e in (
            (f"l1/{reduction.name} contig", contiguous),
            (f"tuned {tuned.config.short()}", tuned),
            ("ordinary stores", plain_stores),
        ):
            runs.append(lambda _, e=e: be.launch(e))
            names.append(name)
    src = torch.randn(1 << 26)
    dst = torch.empty_like(src)
    runs.append(lambda _: dst.copy_(src))
    names.append("copy 2^26 f32")
    print("\t".join(["t_s", *names]), flush=True)
    start = time.time()
    while time.time() - start < minutes * 60:
        medians = timing.interleaved(runs, rounds=3, min_time_s=0.1)
        print("\t".join([f"{time.time() - start:.0f}"] + [f"{r.median_s * 1e6:.0f}" for r in medians]), flush=True)


if __name__ == "__main__":
    main()
