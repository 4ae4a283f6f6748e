"""The fused transposed walk against the walk it replaced (results/performance.md, section 92).

For kl_div's float16 and float32 transposed 0-d rows at 2^22 (the report's layout: the target a
``(65536 x 64).t()`` view, out contiguous), in interleaved rounds in one process: the Zen 5
table's config before the fused walk was offered (``git show 720887a:<table>``), the table's
config now, the fused walk with the other kind of stores, and the contiguous partner at the
config its lookup gives. Outputs bit for bit first. Run from the repository root:

    python results/bench/x86_64-avx512-2t-znver5-cpu-only/probes/fused_walk.py 7

Not part of the package.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import statistics
import subprocess
import sys

import torch

from kernels import timing
from kernels.backends import cpu_loops
from kernels.backends.cpu import CpuBackend
from kernels.modes import Op, Reduction
from kernels.tiling import Tiling
from tuner.goals import spread
from tuner.problems import Case, InputLayout

ROOT = pathlib.Path(__file__).resolve().parents[4]
TABLE = "kernels/configs/cpu/x86_64-avx512-znver5-2t.json"
BEFORE = "720887a"  # the fused walk's commit, before its studies were swept again
N = 1 << 22
BACKEND = CpuBackend()


def table(text: str) -> dict[str, Tiling]:
    return {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(text)["entries"]}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    assert cpu_loops.FUSED, "the fused walk is offered on the Zen 5, or with LOSSTUNE_CPU_FUSED=1"
    before = table(
        subprocess.run(
            ["git", "show", f"{BEFORE}:{TABLE}"], capture_output=True, text=True, cwd=ROOT, check=True
        ).stdout
    )
    now = table((ROOT / TABLE).read_text())
    print(f"# {cpu_loops.target_cpu()}, 2^22, {rounds} rounds; over the contiguous partner, median (min-max)")
    for dtype in (torch.float16, torch.float32):
        case = Case(Op.KL_DIV, dtype, (N,), Reduction.MEAN, layout=InputLayout.TRANSPOSED)
        shipped = now[case.label()]
        other = dataclasses.replace(shipped, stream=not shipped.stream)
        variants = [
            ("before: " + before[case.label()].short(), before[case.label()]),
            ("now: " + shipped.short(), shipped),
        ]
        variants.append(("other stores: " + other.short(), other))
        g, x, t = case.inputs("cpu")
        outs, exs = [], []
        for _, config in variants:
            out = case.out_like(x)
            ex = case.phase_one(g, x, t, out, "cpu", config=config)
            BACKEND.launch(ex)
            outs.append(out)
            exs.append(ex)
        bits = torch.int16 if dtype.itemsize == 2 else torch.int32
        assert all(torch.equal(outs[0].view(bits), o.view(bits)) for o in outs[1:]), "the configs' bits differ"
        flat = Case(case.op, case.dtype, case.shape, case.reduction)
        fg, fx, ft = flat.inputs("cpu")
        fex = flat.phase_one(fg, fx, ft, flat.out_like(fx), "cpu")
        runs = [(lambda _, ex=ex: BACKEND.launch(ex)) for ex in exs]
        runs.append(lambda _, ex=fex: BACKEND.launch(ex))
        measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
        print(f"## {case.label()}  partner {measured[-1].median_s * 1e6:.0f} us", flush=True)
        for (name, _), r in zip(variants, measured, strict=False):
            ratios = [a / b for a, b in zip(r.medians, measured[-1].medians, strict=True)]
            print(
                f"  {name:64s} {r.median_s * 1e6:7.0f} us  {statistics.median(ratios):.2f} ({spread(ratios, '.2f')})",
                flush=True,
            )


if __name__ == "__main__":
    main()
