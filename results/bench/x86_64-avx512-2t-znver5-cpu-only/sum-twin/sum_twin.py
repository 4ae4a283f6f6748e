"""The reduce walk's unit-stride lanes summed by the formula's checked twin, against the formula
alone (section 88): KL log_target's summed layout at 2^22 as the report times it (input one row of
65536 against target's 64 rows), each dtype, full and 0-d gradient, both loop sets in one
interleaved run per case (timing.interleaved), through the public call into one out. "plain" is
the same backend's loops built with no sum twin (Formula.sum_checked_value and
narrow_checked_value None), so each block of lanes is summed by the formula, as before the twin;
its outputs must equal the twin's bit for bit.
Usage: python sum_twin.py [rounds] (from the repository root, or with it on PYTHONPATH)"""

import dataclasses
import statistics
import sys

import torch

from kernels import timing
from kernels.backends import cpu
from kernels.modes import Op, Reduction
from kernels.ops import kl_div
from tuner import machine
from tuner.problems import Case, InputLayout

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 7
LOG = kl_div.FORMULA_LOG


def loop_sets(plain: bool) -> tuple:
    """The KL log_target loop sets of a fresh backend, built with or without the sum twins."""
    backend = cpu.CpuBackend()
    changes = {"sum_checked_value": None, "narrow_checked_value": None} if plain else {}
    saved = {name: getattr(LOG, name) for name in changes}
    for name, v in changes.items():
        object.__setattr__(LOG, name, v)
    try:
        for narrow, summed in ((False, False), (True, False), (False, True)):
            backend.kernels(LOG, narrow, summed=summed)
        return backend._kernels[LOG.name]
    finally:
        for name, v in saved.items():
            object.__setattr__(LOG, name, v)


def call(sets, g, x, t, red, o):
    def run(i: int) -> None:
        cpu.BACKEND._kernels[LOG.name] = sets
        kl_div.kl_div_backward(g, x, t, red, True, out=o, backend="cpu")

    return run


def us(r):
    s = r.summary()
    return f"{r.median_s * 1e6:7.1f} ({s.p20_s * 1e6:.1f}-{s.p80_s * 1e6:.1f})"


host = machine.describe()
print(f"# {host['machine']} ({host['cpu_model']}), torch {host['torch']}; {ROUNDS} rounds, 2^22 summed")
print("# us: median of round medians (p20-p80 of all samples); twin/plain: median (min-max) of the rounds' ratios")
print("dtype     grad  twin                 plain                twin/plain")
sets = {"twin": loop_sets(False), "plain": loop_sets(True)}
for dtype in (torch.float32, torch.float16, torch.bfloat16):
    for red in (Reduction.NONE, Reduction.MEAN):
        case = dataclasses.replace(Case(Op.KL_DIV, dtype, (1 << 22,), red, log_target=True, layout=InputLayout.SUMMED))
        g, x, t = case.inputs("cpu")
        outs = {k: torch.empty(x.shape, dtype=dtype) for k in sets}
        for k, s in sets.items():
            call(s, g, x, t, int(red), outs[k])(0)
        assert torch.equal(outs["twin"].view(torch.uint8), outs["plain"].view(torch.uint8)), "bits differ"
        runs = [call(s, g, x, t, int(red), o) for s, o in zip(sets.values(), outs.values(), strict=True)]
        twin, plain = timing.interleaved(runs, rounds=ROUNDS, min_time_s=0.1)
        ratios = [a / b for a, b in zip(twin.medians, plain.medians, strict=True)]
        grad = "full" if red is Reduction.NONE else "0-d"
        spread = f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
        print(f"{str(dtype)[6:]:9} {grad:5} {us(twin)}  {us(plain)}  {spread}")
cpu.BACKEND._kernels.pop(LOG.name, None)
