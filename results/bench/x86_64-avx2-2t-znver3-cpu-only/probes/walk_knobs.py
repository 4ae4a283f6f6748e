"""Section 72 of results/performance.md: the Zen 4's transposed-walk knobs measured on the Zen 3.

cpu_loops offers the inputs-first order (``transpose_in``, for a formula that reads the target
alone with a 0-d gradient: KL's mean rows) and deferred out stores (``defer_out``, a 16-bit out)
only on the CPUs of ``_WALK_KNOB_CPUS`` (the Zen 4 and the Zen 5); the third knob, half-line rows,
is what an AVX2 host has anyway. This probe measures what the two would give the Zen 3, with the
switches on:

    LOSSTUNE_CPU_INPUTS_FIRST=1 LOSSTUNE_CPU_DEFERRED=1 \\
        python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/walk_knobs.py 5 [OP...]

For every op x dtype x gradient kind (none: full, mean: 0-d) at 2^22, the report's layout size,
where a knob applies: in interleaved rounds in one process, the transposed call with the shipped
config (``kernels/configs/cpu/x86_64-avx2-2t.json``, tuned without the knobs), the same config with
each knob that applies at each of the host's tiles, and the contiguous call with the config its
lookup gives (as in the report). Prints each call's median (us) and its time over the contiguous
call per round, median (min-max), as the report's layout goals read it. Outputs bit for bit
against the shipped config's first. Not part of the package.

With ``tiles`` after the rounds (no switches needed) it measures instead every row whose shipped
config has the space's default tile (4096: a study keeps the default where no candidate leads it
past the noise, tuner.study), against the same config at the host's other tiles:

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/walk_knobs.py 9 tiles [OP...]
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import pathlib
import sys
from types import ModuleType

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import CPU_TRANSPOSED_TILE, Tiling
from tuner.problems import Case, InputLayout

HERE = pathlib.Path(__file__).resolve().parent
SHIPPED = HERE.parents[3] / "kernels/configs/cpu/x86_64-avx2-2t.json"
N = 1 << 22
BACKEND = CpuBackend()
OPS = {"mse": (Op.MSE, False), "l1": (Op.L1, False), "kl_div": (Op.KL_DIV, False), "kl_div-log": (Op.KL_DIV, True)}


def _zen5_probe() -> ModuleType:
    """The Zen 5's walk-knob probe (section 64), for its ``over`` and ``partner``: this one shares
    its name, so it is loaded from its path."""
    path = HERE.parents[1] / "x86_64-avx512-2t-znver5-cpu-only/probes/walk_knobs.py"
    spec = importlib.util.spec_from_file_location("walk_knobs_znver5", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_ZEN5 = _zen5_probe()
over, partner = _ZEN5.over, _ZEN5.partner


def candidates(case: Case, shipped: Tiling, tiles: bool = False) -> list[Tiling]:
    """The shipped config and, at each tile of the host, the same with each knob that applies; with
    ``tiles``, where the shipped tile is the default, the same config at each other tile."""
    if tiles:
        if shipped.tile != CPU_TRANSPOSED_TILE:
            return [shipped]
        others = [t for t in cpu_loops.TRANSPOSED_TILES if t != shipped.tile]
        return [shipped] + [dataclasses.replace(shipped, tile=t) for t in others]
    knobs = []
    if case.dtype.itemsize == 2:
        knobs.append({"defer_out": True})
    if case.op is Op.KL_DIV and case.reduction is Reduction.MEAN:
        knobs.append({"transpose_in": True})
    return [shipped] + [
        dataclasses.replace(shipped, tile=tile, **knob) for knob in knobs for tile in cpu_loops.TRANSPOSED_TILES
    ]


def row(name: str, case: Case, configs: list[Tiling], rounds: int) -> None:
    g, x, t = case.inputs("cpu")
    outs = [case.out_like(x) for _ in configs]
    exs = [case.phase_one(g, x, t, out, "cpu", config=c) for out, c in zip(outs, configs, strict=True)]
    for ex in exs:
        BACKEND.launch(ex)
    bits = torch.int16 if case.dtype.itemsize == 2 else torch.int32
    for c, out in zip(configs, outs, strict=True):
        assert torch.equal(outs[0].view(bits), out.view(bits)), f"{c.short()}: bits differ from the shipped config's"
    fex = partner(case)
    runs = [lambda _, e=ex: BACKEND.launch(e) for ex in exs] + [lambda _: BACKEND.launch(fex)]
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    contiguous = measured[-1]
    grad = "0-d" if case.reduction is Reduction.MEAN else "full"
    dtype = str(case.dtype).removeprefix("torch.")
    for i, (c, m) in enumerate(zip(configs, measured, strict=False)):
        label = "shipped " + c.short() if i == 0 else c.short()
        print(
            f"| {name} | {dtype} | {grad} | {label} | {m.median_s * 1e6:.0f} | {contiguous.median_s * 1e6:.0f} "
            f"| {over(m, contiguous)} |",
            flush=True,
        )


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    tiles = sys.argv[2:3] == ["tiles"]
    ops = sys.argv[2 + tiles :] or list(OPS)
    switches = "LOSSTUNE_CPU_INPUTS_FIRST=1 LOSSTUNE_CPU_DEFERRED=1"
    assert tiles or (cpu_loops.INPUTS_FIRST and cpu_loops.DEFERRED), f"run with {switches}"
    shipped = {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(SHIPPED.read_text())["entries"]}
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; contiguous: the config its lookup gives")
    print("| op | dtype | grad | config | us | contiguous us | over contiguous, median (min-max) |")
    print("|---|---|---|---|---|---|---|")
    for name in ops:
        op, log = OPS[name]
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for reduction in (Reduction.NONE, Reduction.MEAN):
                case = Case(op, dtype, (N,), reduction, log_target=log, layout=InputLayout.TRANSPOSED)
                configs = candidates(case, shipped[case.label()], tiles)
                if len(configs) > 1:
                    row(name, case, configs, rounds)


if __name__ == "__main__":
    main()
