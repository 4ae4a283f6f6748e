"""Reads first_calls.py's outputs with the patch (argv[1]) and without (argv[2]): the loops' IR,
signature by signature, and the first calls' seconds, case by case and in all."""

import json
import statistics
import sys

on, off = (json.load(open(path)) for path in sys.argv[1:3])
assert on["installed"] and not off["installed"], (on["installed"], off["installed"])
same = [k for k in on["ir_sha256"] if on["ir_sha256"][k] == off["ir_sha256"].get(k)]
print(f"loop signatures compiled: {len(on['ir_sha256'])} patched, {len(off['ir_sha256'])} numba's own")
print(f"the same LLVM IR (sha256 of inspect_llvm): {len(same)} of {len(on['ir_sha256'])}")
print(f"{'first call':32s} {'numba':>8s} {'patched':>8s} {'ratio':>6s}")
for case, s_off in off["seconds"].items():
    s_on = on["seconds"][case]
    print(f"{case:32s} {s_off:8.2f} {s_on:8.2f} {s_on / s_off:6.2f}")
t_on, t_off = sum(on["seconds"].values()), sum(off["seconds"].values())
ratios = [on["seconds"][c] / s for c, s in off["seconds"].items()]
print(f"{'all calls':32s} {t_off:8.1f} {t_on:8.1f} {t_on / t_off:6.2f}  (median ratio {statistics.median(ratios):.2f})")
