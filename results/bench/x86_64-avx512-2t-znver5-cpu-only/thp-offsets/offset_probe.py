"""Why did mse float32 contiguous at 2^22 run slower on 2 MiB pages on the Zen 3 (compare.txt in
results/bench/x86_64-avx2-2t-znver3-cpu-only/thp-mse), ours and PyTorch's alike? A guess:
2 MiB-aligned arrays put the four 16 MiB operands (g, x, t, out) at the
same offset in their pages, so element i of each falls in the same cache set.

One child process per page size (THP_MEM_ALLOC_ENABLE unset: 4 KiB pages; =1: 2 MiB pages) times
ours (mse_loss_backward, reduction none, out given) and PyTorch's (aten mse_loss_backward) on the
same arrays, placed four ways: array k (g=0, x=1, t=2, out=3) starts k * (16 MiB + STEP) bytes
after a 2 MiB boundary of one buffer. PyTorch's out is its own allocation, each call; "torch
into out" is PyTorch's out= overload (aten mse_loss_backward.grad_input) into ours. Every
placement is timed in one interleaved run (timing.interleaved), so a slow spell of the host hits
them alike.
  same: STEP 0, the four agree in address bits 0-20 (on 2 MiB pages, physical bits too)
  4K:   STEP 4096, same 4 KiB offset, different L2 sets (the L2 of Zen 3 and Zen 5 indexes bits 6-15)
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
    # One buffer per placement, the four arrays cut from it at a 2 MiB boundary on: torch does not
    # align its own allocations to 2 MiB, even on huge pages (a first version of this probe, with an
    # allocation per array, printed their addresses mod 2 MiB: all different).
    buf = torch.empty(4 * N + 3 * step // 4 + (1 << 19))
    buf.fill_(0.5)  # touch every page before timing
    first = (-buf.data_ptr()) % (2 << 20) // 4
    placed[name] = [buf[first + k * (N + step // 4) :][:N] for k in range(4)]
kb = int(re.search(r"AnonHugePages:\s+(\d+) kB", open("/proc/self/smaps_rollup").read()).group(1))
bits = {n: [a.data_ptr() % (2 << 20) for a in arrs] for n, arrs in placed.items()}

def ours(arrs):
    g, x, t, o = arrs
    return lambda i: mse.mse_loss_backward(g, x, t, "none", out=o)

def vendor(arrs):
    g, x, t, _ = arrs
    return lambda i: torch.ops.aten.mse_loss_backward(g, x, t, 0)

def vendor_into(arrs):
    g, x, t, o = arrs
    return lambda i: torch.ops.aten.mse_loss_backward.grad_input(g, x, t, 0, grad_input=o)

names = list(STEPS)
runs = [f(placed[n]) for f in (ours, vendor, vendor_into) for n in names]
result = timing.interleaved(runs, rounds=rounds, min_time_s=0.1)
print(f"AnonHugePages {kb} kB; address mod 2 MiB of g, x, t, out: {bits}")
def us(r):
    s = r.summary()
    return f"{r.median_s * 1e6:5.0f} us ({s.p20_s * 1e6:.0f}-{s.p80_s * 1e6:.0f})"

for j, n in enumerate(names):
    o, v, vi = result[j], result[len(names) + j], result[2 * len(names) + j]
    ratio = statistics.median(a / b for a, b in zip(o.medians, v.medians))
    print(f"{n:5} ours {us(o)}  torch {us(v)}  torch into out {us(vi)}  ours/torch {ratio:.2f}")
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
