"""How well a report's roofline rows pair their kernel with their copy, round by round: for each
contiguous row of 2^24 and up, the kernel's GB/s by round (roofline % x copy GB/s), the copy's,
their correlation (log GB/s), and the swing (fastest over slowest round) of the kernel, the copy
and their ratio. Usage: pairing.py report.json [...]"""

import json
import math
import statistics as st
import sys


def rows_of(path: str) -> list[dict]:
    with open(path) as f:
        rows = json.load(f)["rows"]
    return [r for r in rows if r["case"] == "contiguous" and r["numel"] >= 2**24]


def swing(v: list[float]) -> float:
    return max(v) / min(v)


def quartiles(v: list[float]) -> str:
    s = sorted(v)
    return f"{st.median(v):.2f} ({s[len(v) // 4]:.2f}-{s[3 * len(v) // 4]:.2f})"


for path in sys.argv[1:]:
    rows = rows_of(path)
    ks, cs, rs, cors, steadier = [], [], [], [], 0
    for r in rows:
        c, p = r["copy_gbps_rounds"], r["roofline_pct_rounds"]
        k = [pp * cc / 100 for pp, cc in zip(p, c, strict=True)]
        ks.append(swing(k))
        cs.append(swing(c))
        rs.append(swing(p))
        cors.append(st.correlation([math.log(v) for v in k], [math.log(v) for v in c]))
        steadier += swing(p) < swing(k)
    grain = {r.get("grain", "run") for r in rows}
    print(
        f"{path}: {len(rows)} rows, grain {','.join(sorted(grain))}; median (quartiles): kernel swing"
        f" {quartiles(ks)}, copy swing {quartiles(cs)}, ratio swing {quartiles(rs)}, corr {quartiles(cors)};"
        f" ratio steadier than the kernel in {steadier}"
    )
