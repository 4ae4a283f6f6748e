"""One-shot call against the kernel, by size, in two full reports (bench --report --out files):
the median and the largest one-shot/kernel ratio, and the median one-shot minus kernel time, over
the contiguous rows both reports have. Usage: python full_reports.py BEFORE.json AFTER.json"""

import json
import statistics
import sys


def rows(path: str) -> dict[tuple[object, ...], tuple[float, float]]:
    with open(path) as f:
        report = json.load(f)
    return {
        (r["op"], r["dtype"], r["numel"], r["reduction"], str(r["shape"])): (r["oneshot_s"], r["tuned_s"])
        for r in report["rows"]
        if r["case"] == "contiguous" and r["oneshot_s"]
    }


def main(before_path: str, after_path: str) -> None:
    before, after = rows(before_path), rows(after_path)
    print("n        rows  one-shot/kernel median  largest      one-shot - kernel (us, median)")
    for n in sorted({k[2] for k in after}):
        keys = [k for k in after if k[2] == n and k in before]
        ratio = [[r[k][0] / r[k][1] for k in keys] for r in (before, after)]
        extra = [[(r[k][0] - r[k][1]) * 1e6 for k in keys] for r in (before, after)]
        print(
            f"{n:<8} {len(keys):>4}  {statistics.median(ratio[0]):.2f} -> {statistics.median(ratio[1]):.2f}"
            f"          {max(ratio[0]):.2f} -> {max(ratio[1]):.2f}"
            f"  {statistics.median(extra[0]):8.2f} -> {statistics.median(extra[1]):.2f}"
        )


if __name__ == "__main__":
    main(*sys.argv[1:3])
