"""The A/B of performance.md section 84: per row, the one-shot call's time over the kernel column's,
before (ab22e26) and after (02582a3), from the four reports in this folder. Run from a checkout:
``python results/bench/x86_64-avx2-2t-znver3-cpu-only/oneshot-ab/compare.py <this folder>``"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent
SIDES = ("before", "after")


def rows(path: Path) -> dict[tuple[object, ...], dict[str, object]]:
    return {(r["op"], r["dtype"], r["numel"], r["reduction"]): r for r in json.loads(path.read_text())["rows"]}


def spread(values: list[float]) -> str:
    """median (p20-p80; min-max)"""
    v = sorted(values)
    n = len(v)
    p20, p80 = v[int(0.2 * (n - 1))], v[min(n - 1, int(0.8 * (n - 1) + 0.999))]
    return f"{statistics.median(v):.2f} ({p20:.2f}-{p80:.2f}; {v[0]:.2f}-{v[-1]:.2f})"


def main() -> None:
    runs = {s: [rows(HERE / f"{s}-{i}.json") for i in (1, 2)] for s in SIDES}
    for numel in (1 << 10, 1 << 16):
        print(f"== 2^{numel.bit_length() - 1}: median (p20-p80; min-max) over the 16 rows x 2 runs")
        for side in SIDES:
            picked = [r for run in runs[side] for k, r in run.items() if k[2] == numel]
            ratio = [r["oneshot_s"] / r["tuned_s"] for r in picked]
            over = [(r["oneshot_s"] - r["tuned_s"]) * 1e6 for r in picked]
            over_2x = sum(x > 2 for x in ratio)
            print(f"  {side:6s} one-shot/kernel {spread(ratio)}; rows over 2x: {over_2x} of {len(ratio)}")
            print(f"         one-shot - kernel, us {spread(over)}")
            print(f"         one-shot, us {spread([r['oneshot_s'] * 1e6 for r in picked])}")
            print(f"         kernel, us {spread([r['tuned_s'] * 1e6 for r in picked])}")
        pairs = [(a, runs["before"][i][k]) for i in (0, 1) for k, a in runs["after"][i].items() if k[2] == numel]
        print(f"  after/before, paired rows: one-shot {spread([a['oneshot_s'] / b['oneshot_s'] for a, b in pairs])}")
        print(f"                             kernel {spread([a['tuned_s'] / b['tuned_s'] for a, b in pairs])}")
    print("== 2^16 rows, one-shot/kernel per run: before-1 before-2 | after-1 after-2")
    for k in sorted(runs["before"][0]):
        if k[2] != 1 << 16:
            continue
        v = [runs[s][i][k]["oneshot_s"] / runs[s][i][k]["tuned_s"] for s in SIDES for i in (0, 1)]
        print(f"  {k[0]:10s} {k[1]:8s} {k[3]:5s} {v[0]:.2f} {v[1]:.2f} | {v[2]:.2f} {v[3]:.2f}")


if __name__ == "__main__":
    main()
