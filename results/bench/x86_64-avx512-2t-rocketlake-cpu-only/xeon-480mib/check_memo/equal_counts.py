"""How many elements of a kernel's out differ from the float64 reference rounded to the out's dtype, by their distance
in the dtype's ulps (the ordered integer keys of the bits), for op:dtype:log2n cases (mean: a 0-d gradient), the
default config. A chunk takes accuracy.mismatch's float64 path unless all its elements are at distance 0.

Run from a checkout: PYTHONPATH=. python results/bench/<machine>/xeon-480mib/check_memo/equal_counts.py mse:float32:24
"""

import sys

import torch

from kernels import accuracy
from kernels.modes import Reduction
from tuner import study as st
from tuner.problems import Case, Op

BITS = {2: torch.int16, 4: torch.int32}


def keys(a: torch.Tensor) -> torch.Tensor:
    """Ordered integer keys of a float tensor's bits: adjacent floats differ by 1, -0 and +0 are one."""
    b = a.view(BITS[a.element_size()]).long()
    sign = 1 << (8 * a.element_size() - 1)
    return torch.where(b < 0, -(b & (sign - 1)), b)


for spec in sys.argv[1:]:
    op, dt, lg = spec.split(":")
    log = op.endswith("-log")
    case = Case(Op(op.removesuffix("-log")), getattr(torch, dt), (1 << int(lg),), Reduction.MEAN, log_target=log)
    bench = st._Bench.make(case, "cpu")
    verdict = bench.check(bench.executor(None))
    out, rounded = bench.out.reshape(-1), bench.ref.reshape(-1).to(bench.out.dtype)
    d = (keys(out) - keys(rounded)).abs().clamp(max=3)
    hist = torch.bincount(d, minlength=4).tolist()
    chunks = sum(bool((d[s : s + accuracy.CHUNK] == 0).all()) for s in range(0, d.numel(), accuracy.CHUNK))
    n, nchunks = d.numel(), -(-d.numel() // accuracy.CHUNK)
    print(
        f"{spec}: check {verdict}; elements at 0, 1, 2, 3+ ulps from the rounded reference {hist}"
        f" ({1 - hist[0] / n:.1%} not equal); chunks of {accuracy.CHUNK} all equal: {chunks} of {nchunks}"
    )
