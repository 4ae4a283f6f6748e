"""The vendor goal on huge pages: bench --report --out files of runs alternating off, on, off, on
(THP_MEM_ALLOC_ENABLE unset, then 1). Per row (contiguous and broadcast): PyTorch's time, our
kernel's, and our speedup over PyTorch in every run; then, by size, the on/off ratios of PyTorch's
time, the kernel's and the one-shot call's, each on run paired with the off run before it, and the
lowest speedup over PyTorch each page size read.
Usage: python compare.py off-1.json on-1.json off-2.json on-2.json"""

import json
import statistics
import sys

Key = tuple[str, str, str, int, str]


def rows(path: str) -> dict[Key, dict[str, float]]:
    with open(path) as f:
        report = json.load(f)
    return {(r["op"], r["dtype"], r["case"].split(" ")[0], r["numel"], r["reduction"]): r for r in report["rows"]}


def spread(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f}), {len(xs)} pairs"


def main(paths: list[str]) -> None:
    runs = [rows(p) for p in paths]
    pairs = list(zip(runs[0::2], runs[1::2], strict=True))  # (off, on) in the order they ran
    head = "op         dtype     layout      n     red   vendor us (off, on, off, on)"
    print(head + "      kernel us (off, on, off, on)      x vendor (off, on, off, on)")
    by_size: dict[str, dict[str, list[float]]] = {}
    lowest: dict[str, list[tuple[float, Key]]] = {"off": [], "on": []}
    for key in sorted(runs[0], key=lambda k: (k[3], k[1], k[2], k[4])):
        r = [run[key] for run in runs]
        op, dtype, layout, n, red = key
        vendor = " ".join(f"{x['vendor_s'] * 1e6:7.0f}" for x in r)
        kernel = " ".join(f"{x['tuned_s'] * 1e6:7.0f}" for x in r)
        speed = " ".join(f"{x['speedup_vs_vendor']:5.2f}" for x in r)
        print(f"{op:<10} {dtype:<9} {layout:<11} 2^{n.bit_length() - 1:<3} {red:<5} {vendor}   {kernel}   {speed}")
        size = "2^22" if n <= 1 << 22 else "2^24-2^26"
        ratios = by_size.setdefault(size, {"vendor time": [], "kernel time": [], "one-shot time": []})
        for off, on in pairs:
            ratios["vendor time"].append(on[key]["vendor_s"] / off[key]["vendor_s"])
            ratios["kernel time"].append(on[key]["tuned_s"] / off[key]["tuned_s"])
            ratios["one-shot time"].append(on[key]["oneshot_s"] / off[key]["oneshot_s"])
            lowest["off"].append((off[key]["speedup_vs_vendor"], key))
            lowest["on"].append((on[key]["speedup_vs_vendor"], key))
    for size, ratios in by_size.items():
        for name, xs in ratios.items():
            print(f"{size} {name} on/off: {spread(xs)}")
    for pages, xs in lowest.items():
        low, key = min(xs)
        under = sum(x < 1.0 for x, _ in xs)
        named = " ".join(map(str, key))
        print(f"THP {pages}: lowest x vendor {low:.2f} ({named}); {under} of {len(xs)} row-runs under 1.0")


if __name__ == "__main__":
    main(sys.argv[1:5])
