"""Where a cached public mse call's host side goes, against PyTorch's call into a given out: each
part of mse_loss_backward(g, x, t, "none", out=o) timed on its own, float32 contiguous, at 2^10
and 2^16. Each figure is the median of 7 loops of 20000 calls, in ns a call, lambda included
(about 30 ns). Usage: python call_parts.py (from the repository root, or with it on PYTHONPATH)"""

import statistics
import time

import torch

from kernels import dispatch
from kernels.ops import mse
from tuner import machine


def ns(fn, n=20000, reps=7):
    loops = []
    for _ in range(reps):
        start = time.perf_counter_ns()
        for _ in range(n):
            fn()
        loops.append((time.perf_counter_ns() - start) / n)
    return statistics.median(loops)


def parts(n):
    """The calls timed at n elements, by name."""
    g, x, t, o = torch.rand(n), torch.rand(n), torch.rand(n), torch.empty(n)
    mse.mse_loss_backward(g, x, t, "none", out=o)  # plans and caches it
    call = mse._call("none")
    key = dispatch.plan_key(call, g, x, t, o, None, None, True)
    template, _ = dispatch._plans[key]
    go = template.launcher
    return {
        "public call": lambda: mse.mse_loss_backward(g, x, t, "none", out=o),
        "  _call": lambda: mse._call("none"),
        "  plan_key": lambda: dispatch.plan_key(call, g, x, t, o, None, None, True),
        "  run_cached": lambda: dispatch.run_cached(key, g, x, t, o),
        "    its dict get": lambda: dispatch._plans.get(key),
        "    its launcher": lambda: go(g, x, t, o),
        "PyTorch into out": lambda: torch.ops.aten.mse_loss_backward.grad_input(g, x, t, 0, grad_input=o),
        "x.dtype, .shape, .stride(), .device": lambda: (x.dtype, x.shape, x.stride(), x.device),
    }


host = machine.describe()
print(f"# {host['machine']} ({host['cpu_model']}), torch {host['torch']}; ns a call")
for p in (10, 16):
    for name, fn in parts(1 << p).items():
        print(f"2^{p} {name:36} {ns(fn):6.0f}")
