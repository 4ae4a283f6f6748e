"""Section 71 of results/performance.md: the raw-pattern tile flag in the walks' twin runs apart
(run_apart's raw_flag_run) against the per-element flag, KL log_target on the Zen 5.

Each pair runs this file once per build in its own process (``LOSSTUNE_CPU_RAW_FLAG`` 0 and 1:
the gate is read at import), the first build alternating from pair to pair. A process times,
interleaved, each layout call (transposed, broadcast) at the config the shipped table froze for
it (``kernels/configs/cpu/x86_64-avx512-znver5-2t.json``, by case label; the entries are stale
while the edit is unstamped, so the config is passed explicitly) and its contiguous partner at
the config its lookup gives, and prints the medians as JSON. The parent prints per row: each
build's layout medians per pair with the layout / contiguous ratio, and raw / element per pair.
float32 is the control: on the Zen 5 its outputs take the inline loops in both builds.

    python raw_runs_ab.py PAIRS [ROUNDS]
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve()
SHIPPED = HERE.parents[4] / "kernels/configs/cpu/x86_64-avx512-znver5-2t.json"
N = 1 << 22


def child(rounds: int) -> None:
    import torch

    from kernels import timing
    from kernels.backends import cpu_loops
    from kernels.backends.cpu import CpuBackend
    from kernels.modes import Op, Reduction
    from kernels.tiling import Tiling
    from tuner.problems import Case, InputLayout

    backend = CpuBackend()
    shipped = {e["case"]: Tiling.from_dict(e["config"]) for e in json.loads(SHIPPED.read_text())["entries"]}
    rows = {}
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        for reduction in (Reduction.NONE, Reduction.MEAN):
            flat = Case(Op.KL_DIV, dtype, (N,), reduction, log_target=True)
            g, x, t = flat.inputs("cpu")
            fout = flat.out_like(x)
            fex = flat.phase_one(g, x, t, fout, "cpu")
            for layout in (InputLayout.TRANSPOSED, InputLayout.BROADCAST):
                case = Case(Op.KL_DIV, dtype, (N,), reduction, log_target=True, layout=layout)
                cg, cx, ct = case.inputs("cpu")
                out = case.out_like(cx)
                ex = case.phase_one(cg, cx, ct, out, "cpu", config=shipped.get(case.label()))
                runs = [lambda _, e=ex: backend.launch(e), lambda _, e=fex: backend.launch(e)]
                m = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
                rows[case.label()] = {
                    "raw": cpu_loops.RAW_FLAG,
                    "layout_us": m[0].median_s * 1e6,
                    "contiguous_us": m[1].median_s * 1e6,
                    "over": statistics.median(a / b for a, b in zip(m[0].medians, m[1].medians, strict=True)),
                }
    print(json.dumps(rows))


def main() -> None:
    pairs = int(sys.argv[1])
    rounds = sys.argv[2] if len(sys.argv) > 2 else "5"
    got: dict[str, dict[str, list[dict]]] = {}
    builds = (("element", "0"), ("raw", "1"))
    for pair in range(pairs):
        # Which build goes first alternates: identical float32 loops (both builds' float32 outputs
        # take the inline loops on the Zen 5) read 0.84x when the raw build always went second.
        for name, flag in builds if pair % 2 == 0 else builds[::-1]:
            env = dict(os.environ, LOSSTUNE_CPU_RAW_FLAG=flag)
            done = subprocess.run(
                [sys.executable, str(HERE), "--child", rounds], env=env, capture_output=True, text=True, check=True
            )
            for label, r in json.loads(done.stdout.splitlines()[-1]).items():
                assert r["raw"] == (flag == "1"), "the child did not read the switch"
                got.setdefault(label, {}).setdefault(name, []).append(r)
    order = "which first alternating"
    print(f"# {pairs} pairs of processes (LOSSTUNE_CPU_RAW_FLAG=0 and 1, {order}), {rounds} rounds each, 2^22; us")
    print("| row | element: layout (layout/contiguous) | raw: layout (layout/contiguous) | raw / element per pair |")
    print("|---|---|---|---|")
    for label, r in got.items():
        e, w = r["element"], r["raw"]
        per = [b["layout_us"] / a["layout_us"] for a, b in zip(e, w, strict=True)]
        fmt = lambda rs: ", ".join(f"{x['layout_us']:.1f} ({x['over']:.2f})" for x in rs)  # noqa: E731
        pairs_text = f"{', '.join(f'{p:.2f}' for p in per)} (median {statistics.median(per):.2f})"
        print(f"| {label} | {fmt(e)} | {fmt(w)} | {pairs_text} |")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(int(sys.argv[2]))
    else:
        main()
