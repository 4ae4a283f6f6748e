"""Section 72 of results/performance.md: the raw-pattern tile flag (cpu_loops.RAW_FLAG) against
the per-element flag on an AVX2 host, KL log_target through the library.

Each pair runs ``losstune bench --json`` once per build in its own process
(``LOSSTUNE_CPU_RAW_FLAG`` 0 and 1: the gate is read at import), the first build alternating
from pair to pair (a fixed order read 0.84x on identical loops in section 71). On an AVX2 host
the twin runs for float32 and bfloat16 outputs; a float16 output of a float16 gradient takes
half_value's loops, with no twin, and a float32 target keeps the per-element flag in both builds,
so float32 is the control. Prints, per row, each build's medians per pair and raw / element.

    python raw_flag_ab.py PAIRS ROUNDS DTYPE... -- BENCH-ARGS...
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys


def run(raw: int, dtypes: list[str], rounds: int, extra: list[str]) -> dict[str, float]:
    cmd = [sys.executable, "-m", "tuner", "bench", "--json", "--rounds", str(rounds), "--op", "kl_div-log"]
    for d in dtypes:
        cmd += ["--dtype", d]
    env = dict(os.environ, LOSSTUNE_CPU_RAW_FLAG=str(raw))
    rows = json.loads(subprocess.run(cmd + extra, env=env, check=True, capture_output=True, text=True).stdout)
    return {f"{r['dtype']} {r['shape']} {r['reduction']} {r['case']}": r["tuned_s"] * 1e6 for r in rows}


def main() -> None:
    pairs, rounds = int(sys.argv[1]), int(sys.argv[2])
    split = sys.argv.index("--")
    dtypes, extra = sys.argv[3:split], sys.argv[split + 1 :]
    got: dict[int, list[dict[str, float]]] = {0: [], 1: []}
    for p in range(pairs):
        for raw in (0, 1) if p % 2 == 0 else (1, 0):
            got[raw].append(run(raw, dtypes, rounds, extra))
            print(f"# pair {p + 1}, LOSSTUNE_CPU_RAW_FLAG={raw} done", file=sys.stderr, flush=True)
    print("| row | element flag (=0), us | raw flag (=1), us | raw / element per pair |")
    print("|---|---|---|---|")
    for row in got[0][0]:
        el = [g[row] for g in got[0]]
        raw = [g[row] for g in got[1]]
        ratios = [r / e for r, e in zip(raw, el, strict=True)]
        print(
            f"| {row} | {', '.join(f'{v:.1f}' for v in el)} | {', '.join(f'{v:.1f}' for v in raw)} | "
            f"{', '.join(f'{v:.2f}' for v in ratios)} (median {statistics.median(ratios):.2f}) |"
        )


if __name__ == "__main__":
    main()
