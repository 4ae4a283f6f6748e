"""How well a report's roofline rows pair their kernel with their copy, round by round: for each
contiguous row of 2^24 and up, the kernel's GB/s by round (roofline % x copy GB/s), the copy's,
their correlation (log GB/s), and the swing (fastest over slowest round) of the kernel, the copy
and their ratio. Usage: pairing.py report.json [...]"""
import json, math, statistics as st, sys

def rows_of(path):
    return [r for r in json.load(open(path))["rows"] if r["case"] == "contiguous" and r["numel"] >= 2**24]

def swing(v):
    return max(v) / min(v)

for path in sys.argv[1:]:
    rows = rows_of(path)
    ks, cs, rs, cors, steadier = [], [], [], [], 0
    for r in rows:
        c, p = r["copy_gbps_rounds"], r["roofline_pct_rounds"]
        k = [pp * cc / 100 for pp, cc in zip(p, c)]
        ks.append(swing(k)); cs.append(swing(c)); rs.append(swing(p))
        cors.append(st.correlation([math.log(v) for v in k], [math.log(v) for v in c]))
        steadier += swing(p) < swing(k)
    q = lambda v: f"{st.median(v):.2f} ({sorted(v)[len(v)//4]:.2f}-{sorted(v)[3*len(v)//4]:.2f})"
    grain = {r.get("grain", "run") for r in rows}
    print(f"{path}: {len(rows)} rows, grain {','.join(sorted(grain))}; median (quartiles): kernel swing {q(ks)},"
          f" copy swing {q(cs)}, ratio swing {q(rs)}, corr {q(cors)}; ratio steadier than the kernel in {steadier}")
