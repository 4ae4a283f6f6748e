"""What is our lead over PyTorch made of, for mse? bench --report's vendor column is PyTorch's
backward as a user calls it, which allocates its result every call, while its kernel column is
ours into an out allocated once. Here both sides are timed both ways, as public calls (plan cache
and dispatch included), in one interleaved run per case (timing.interleaved):
  ours out:     mse_loss_backward(g, x, t, red, out=o)
  ours alloc:   mse_loss_backward(g, x, t, red)
  torch out:    aten mse_loss_backward.grad_input(g, x, t, red, grad_input=o)
  torch alloc:  aten mse_loss_backward(g, x, t, red)
Contiguous operands; "full" is reduction none (g as large as x), "0-d" is mean (g a 0-d tensor).
Usage: python vendor_out.py [rounds] (from the repository root, or with it on PYTHONPATH)"""

import statistics
import sys

import torch

from kernels import timing
from kernels.ops import mse
from tuner import machine

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
KINDS = {"full": ("none", 0), "0-d": ("mean", 1)}


def runs(g, x, t, o, red, code):
    return (
        lambda i: mse.mse_loss_backward(g, x, t, red, out=o),
        lambda i: mse.mse_loss_backward(g, x, t, red),
        lambda i: torch.ops.aten.mse_loss_backward.grad_input(g, x, t, code, grad_input=o),
        lambda i: torch.ops.aten.mse_loss_backward(g, x, t, code),
    )


def ratio(a, b):
    """a's time over b's, round by round (both measured in each round), the median."""
    return statistics.median(u / v for u, v in zip(a.medians, b.medians, strict=True))


def us(r):
    s = r.summary()
    return f"{r.median_s * 1e6:8.1f} ({s.p20_s * 1e6:.1f}-{s.p80_s * 1e6:.1f})"


host = machine.describe()
print(f"# {host['machine']} ({host['cpu_model']}), torch {host['torch']}, {host['torch_pages']}; {ROUNDS} rounds")
print("# times in us: median of round medians (p20-p80 of all samples); ratios: median over rounds")
head = "dtype     kind  n     ours out              ours alloc            torch out             torch alloc"
print(head + "           torch out/ours out  torch alloc/ours out  torch alloc/ours alloc")
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for p in (16, 18, 20, 22, 24, 26):
        n = 1 << p
        x, t = torch.rand(n, dtype=dtype), torch.rand(n, dtype=dtype)
        o = torch.empty(n, dtype=dtype)
        for kind, (red, code) in KINDS.items():
            g = torch.rand(n, dtype=dtype) if kind == "full" else torch.tensor(0.5, dtype=dtype)
            got = timing.interleaved(runs(g, x, t, o, red, code), rounds=ROUNDS, min_time_s=0.1)
            ours_out, ours_alloc, torch_out, torch_alloc = got

            cells = "  ".join(us(r) for r in got)
            print(
                f"{str(dtype)[6:]:9} {kind:5} 2^{p:<3} {cells}"
                f"  {ratio(torch_out, ours_out):18.2f}  {ratio(torch_alloc, ours_out):20.2f}"
                f"  {ratio(torch_alloc, ours_alloc):22.2f}",
                flush=True,
            )
