"""Why did mse float32 contiguous at 2^22 run slower on 2 MiB pages (compare.txt), ours and
PyTorch's alike? A guess: torch's 2 MiB-aligned allocations put the four 16 MiB arrays (g, x, t,
out) at the same offset in their pages, so element i of each falls in the same cache set.

One child process per page size (THP_MEM_ALLOC_ENABLE unset: 4 KiB pages; =1: 2 MiB pages) times
ours (mse_loss_backward, reduction none, out given) and PyTorch's (aten mse_loss_backward) on the
same arrays, placed four ways: array k (g=0, x=1, t=2, out=3) starts k * STEP bytes into a buffer
that torch allocated. Every placement is timed in one interleaved run (timing.interleaved), so a
slow spell of the host hits them alike.
  same: STEP 0, the report's placement (on 2 MiB pages all four agree in address bits 0-20)
  4K:   STEP 4096, same 4 KiB offset, different L2 sets (Zen 3's L2 indexes bits 6-15)
  64K:  STEP 65536, same bits 0-15: same L2 set on 2 MiB pages; on 4 KiB pages bits 12-15 are
        physical and set by the kernel's page choice
  odd:  STEP 20928 (0x51C0), different in bits 6-11 too
Usage: python offset_probe.py [rounds] (from the repository root, or with it on PYTHONPATH)"""

import os
import subprocess
import sys

CHILD = r"""
import re, statistics, sys, torch
from kernels import timing
from kernels.ops import mse

N = 1 << 22
STEPS = {"same": 0, "4K": 4096, "64K": 65536, "odd": 20928}
rounds = int(sys.argv[1])
placed = {}
for name, step in STEPS.items():
    arrays = []
    for k in range(4):
        skip = k * step // 4  # float32 elements
        buf = torch.empty(N + skip)
        buf.fill_(0.5 + k)  # touch every page before timing
        arrays.append(buf[skip : skip + N])
    placed[name] = arrays
kb = int(re.search(r"AnonHugePages:\s+(\d+) kB", open("/proc/self/smaps_rollup").read()).group(1))
bits = {n: [a.data_ptr() % (2 << 20) for a in arrs] for n, arrs in placed.items()}

def ours(arrs):
    g, x, t, o = arrs
    return lambda i: mse.mse_loss_backward(g, x, t, "none", out=o)

def vendor(arrs):
    g, x, t, _ = arrs
    return lambda i: torch.ops.aten.mse_loss_backward(g, x, t, 0)

names = list(STEPS)
runs = [ours(placed[n]) for n in names] + [vendor(placed[n]) for n in names]
result = timing.interleaved(runs, rounds=rounds, min_time_s=0.1)
print(f"AnonHugePages {kb} kB; address mod 2 MiB of g, x, t, out: {bits}")
for j, n in enumerate(names):
    o, v = result[j], result[len(names) + j]
    so, sv = o.summary(), v.summary()
    ratio = statistics.median(a / b for a, b in zip(o.medians, v.medians))
    print(f"{n:5} ours {o.median_s * 1e6:7.0f} us (p20 {so.p20_s * 1e6:.0f}, p80 {so.p80_s * 1e6:.0f})"
          f"  torch {v.median_s * 1e6:7.0f} us (p20 {sv.p20_s * 1e6:.0f}, p80 {sv.p80_s * 1e6:.0f})"
          f"  ours/torch {ratio:.2f}")
"""

rounds = sys.argv[1] if len(sys.argv) > 1 else "7"
for i in (1, 2):
    for value in (None, "1"):
        env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
        if value is not None:
            env["THP_MEM_ALLOC_ENABLE"] = value
        done = subprocess.run([sys.executable, "-c", CHILD, rounds], env=env, capture_output=True, text=True)
        pages = "2 MiB pages (THP_MEM_ALLOC_ENABLE=1)" if value else "4 KiB pages (THP_MEM_ALLOC_ENABLE unset)"
        print(f"## run {i}, {pages}, rc {done.returncode}")
        print(done.stdout.strip() or done.stderr.strip()[-2000:], flush=True)
