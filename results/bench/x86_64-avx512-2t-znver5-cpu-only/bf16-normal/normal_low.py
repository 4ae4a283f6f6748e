"""KL log_target's bfloat16 loops with a 0-d gradient: each contiguous tile, or each unit-stride
run of the walks, held to Formula.normal_low and stored by vcvtneps2bf16 alone ("normal"), against
the same backend's loops built without normal_low, whose stores flag each subnormal value
("flag"), as before. One interleaved run per row (timing.interleaved) of both through the public
call into one out, with torch's copy_ of the same bytes (one bfloat16 read and one written an
element) as the roofline, as bench --report takes it. Contiguous at 2^20-2^26 on the table's
config for 2^24 (scalar_grad, tile 4096, 2 cores, neither prefetch nor streaming); the report's
transposed layout at 2^22 on the table's config for it (strided, tile 4096, 2 cores, streamed,
rows of 32), its broadcast layout on the strided walk (tile 4096, 2 cores). Outputs are checked bit for bit first.
Usage: python normal_low.py [rounds] (from the repository root, or with it on PYTHONPATH)"""

import statistics
import sys

import torch

from kernels import timing
from kernels.backends import cpu
from kernels.modes import Op, Reduction
from kernels.ops import kl_div
from kernels.tiling import Tiling
from tuner import machine
from tuner.problems import Case, InputLayout

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
LOG = kl_div.FORMULA_LOG
CONFIG = Tiling.from_dict({"variant": "scalar_grad", "tile": 4096, "cores": 2})
WALK = Tiling.from_dict({"variant": "strided", "tile": 4096, "cores": 2, "stream": True, "transpose_row": 32})
BROADCAST = Tiling.from_dict({"variant": "strided", "tile": 4096, "cores": 2})
ROWS = [(InputLayout.CONTIGUOUS, n, CONFIG) for n in (20, 22, 24, 26)]
ROWS += [(InputLayout.TRANSPOSED, 22, WALK), (InputLayout.BROADCAST, 22, BROADCAST)]


def loop_sets(plain: bool) -> tuple:
    """The KL log_target loop sets of a fresh backend, built with or without normal_low."""
    backend = cpu.CpuBackend()
    saved = LOG.normal_low
    if plain:
        object.__setattr__(LOG, "normal_low", None)
    try:
        for narrow, summed in ((False, False), (True, False), (False, True)):
            backend.kernels(LOG, narrow, summed=summed)
        return backend._kernels[LOG.name]
    finally:
        object.__setattr__(LOG, "normal_low", saved)


def call(sets, g, x, t, o, config):
    def run(i: int) -> None:
        cpu.BACKEND._kernels[LOG.name] = sets
        kl_div.kl_div_backward(g, x, t, "mean", True, out=o, backend="cpu", config=config)

    return run


def us(r):
    s = r.summary()
    return f"{r.median_s * 1e6:8.1f} ({s.p20_s * 1e6:.1f}-{s.p80_s * 1e6:.1f})"


def spread(a, b):
    ratios = [x / y for x, y in zip(a.medians, b.medians, strict=True)]
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


host = machine.describe()
print(f"# {host['machine']} ({host['cpu_model']}), torch {host['torch']}; {ROUNDS} rounds, bfloat16 0-d")
print(f"# contiguous: {CONFIG.to_dict()}")
print(f"# transposed: {WALK.to_dict()}")
print(f"# broadcast: {BROADCAST.to_dict()}")
print("# us: median of round medians (p20-p80 of all samples); ratios: median (min-max) of the rounds' ratios")
HEAD = ("layout     n", "normal", "flag", "copy", "normal/flag", "roofline normal", "roofline flag")
print(f"{HEAD[0]:17}{HEAD[1]:24}{HEAD[2]:24}{HEAD[3]:24}{HEAD[4]:18}{HEAD[5]:18}{HEAD[6]}")
sets = {"normal": loop_sets(False), "flag": loop_sets(True)}
for layout, log2n, config in ROWS:
    case = Case(Op.KL_DIV, torch.bfloat16, (1 << log2n,), Reduction.MEAN, log_target=True, layout=layout)
    g, x, t = case.inputs("cpu")
    outs = {k: case.out_like(x) for k in sets}
    for k, s in sets.items():
        call(s, g, x, t, outs[k], config)(0)
    assert torch.equal(outs["normal"].view(torch.int16), outs["flag"].view(torch.int16)), "bits differ"
    src, dst = torch.ones(x.numel(), dtype=x.dtype), torch.ones(x.numel(), dtype=x.dtype)  # pages touched
    runs = [call(s, g, x, t, o, config) for s, o in zip(sets.values(), outs.values(), strict=True)]
    runs.append(lambda i, dst=dst, src=src: dst.copy_(src))
    normal, flag, copy = timing.interleaved(runs, rounds=ROUNDS, min_time_s=0.1)
    print(
        f"{layout.value:10} 2^{log2n}  {us(normal)}  {us(flag)}  {us(copy)}  {spread(normal, flag):16}  "
        f"{spread(copy, normal):16}  {spread(copy, flag)}"
    )
cpu.BACKEND._kernels.pop(LOG.name, None)
