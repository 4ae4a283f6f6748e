"""Is the copy's speed a property of its buffers (where their pages landed) or of the moment?
Eight allocations of the copy's buffers for NBYTES moved (default 64 MiB: the 2^24 16-bit 0-d
rows' yardstick), timed in 5 interleaved rounds with each other (section 46).

    .venv/bin/python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/copy_buffers.py [NBYTES]
"""

from __future__ import annotations

import statistics
import sys

from kernels import timing

nbytes = int(sys.argv[1]) if len(sys.argv) > 1 else 64 << 20
keep = [timing.copy_probe("cpu", nbytes) for _ in range(8)]
timed = timing.interleaved([run for run, _ in keep], rounds=5, min_time_s=0.1)
for i, ((_, moved), r) in enumerate(zip(keep, timed, strict=True)):
    rates = [moved / m / 1e9 for m in r.medians]
    spread = f"rounds {min(rates):.1f}-{max(rates):.1f}"
    print(f"allocation {i}: {statistics.median(rates):5.1f} GB/s ({spread})", flush=True)
