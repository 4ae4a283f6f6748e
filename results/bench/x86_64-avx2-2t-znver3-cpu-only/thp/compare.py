"""Huge pages against 4 KiB pages, per report row: bench --report --out files of runs alternating
off, on, off, on (THP_MEM_ALLOC_ENABLE unset, then 1). For each row the kernel's time, the copy's
GB/s and the roofline % of every run, then the on/off ratio of the kernel's time and of the copy's
GB/s, each run paired with the off run before it; the same ratios for the vendor's (PyTorch's)
time and the one-shot call's, the two that allocate their output on every call.
Usage: python compare.py off-1.json on-1.json off-2.json on-2.json"""

import json
import statistics
import sys


def rows(path: str) -> dict[tuple[object, ...], dict[str, object]]:
    with open(path) as f:
        report = json.load(f)
    return {(r["op"], r["dtype"], r["numel"], r["reduction"]): r for r in report["rows"] if r["case"] == "contiguous"}


def main(paths: list[str]) -> None:
    runs = [rows(p) for p in paths]
    pairs = list(zip(runs[0::2], runs[1::2], strict=True))  # (off, on) in the order they ran
    fields = {
        "kernel time": "tuned_s",
        "copy GB/s": "copy_gbps",
        "vendor time": "vendor_s",
        "one-shot time": "oneshot_s",
    }
    ratios: dict[str, list[float]] = {name: [] for name in fields}
    print("op          dtype     n     red   kernel us (off, on, off, on)   copy GB/s              roofline %")
    for key in sorted(runs[0], key=str):
        r = [run[key] for run in runs]
        us = " ".join(f"{x['tuned_s'] * 1e6:7.0f}" for x in r)
        gbps = " ".join(f"{x['copy_gbps']:5.1f}" for x in r)
        pct = " ".join(f"{x['roofline_pct']:4.0f}" for x in r)
        op, dtype, n, red = key
        print(f"{op:<11} {dtype:<9} 2^{n.bit_length() - 1:<3} {red:<5} {us}   {gbps}   {pct}")
        for off, on in pairs:
            for name, field in fields.items():
                ratios[name].append(on[key][field] / off[key][field])
    for name, xs in ratios.items():
        q = statistics.quantiles(xs, n=5)
        spread = f"p20-p80 {q[0]:.2f}-{q[3]:.2f}; {min(xs):.2f}-{max(xs):.2f}"
        print(f"{name} on/off: median {statistics.median(xs):.2f} ({spread}), {len(xs)} pairs")


if __name__ == "__main__":
    main(sys.argv[1:5])
