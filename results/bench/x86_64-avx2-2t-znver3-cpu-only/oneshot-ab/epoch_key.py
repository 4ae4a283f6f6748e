"""plan_key with and without the epoch element, each a hit in _plans: timeit, one process."""

import inspect
import statistics
import timeit

import torch

import kernels
from kernels import dispatch
from kernels.modes import Op

g, x, t = torch.randn(()), torch.randn(65536), torch.randn(65536)
call = (Op.MSE, str, "mean")
kernels.mse_loss_backward(g, x, t, "mean")
src = inspect.getsource(dispatch.plan_key)
assert "        _epoch,\n" in src
ns = vars(dispatch).copy()
exec(src.replace("def plan_key", "def with_epoch"), ns)
exec(src.replace("def plan_key", "def without").replace("        _epoch,\n", ""), ns)
with_epoch, without = ns["with_epoch"], ns["without"]
(plan,) = dispatch._plans.values()
dispatch._plans[without(call, g, x, t, None, None, None, True)] = plan
assert with_epoch(call, g, x, t, None, None, None, True) in dispatch._plans and len(dispatch._plans) == 2
get = dispatch._plans.get


def a():
    return get(with_epoch(call, g, x, t, None, None, None, True))


def b():
    return get(without(call, g, x, t, None, None, None, True))


for name, f in [("epoch", a), ("no epoch", b)] * 3:
    r = timeit.repeat(f, number=50000, repeat=7)
    print(f"{name:9s} min {min(r) / 50000 * 1e6:.3f} us, median {statistics.median(r) / 50000 * 1e6:.3f} us")
