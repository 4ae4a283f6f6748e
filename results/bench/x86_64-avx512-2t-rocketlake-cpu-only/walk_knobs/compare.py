"""Each row of a before_after.py output: the two configs' times and their ratio (now over before),
and each one's time over the contiguous partner. Not part of the package.

    python results/bench/x86_64-avx512-2t-rocketlake-cpu-only/walk_knobs/compare.py before_after.txt
"""

import re
import sys

label = before = ratio = None
for line in open(sys.argv[1]):
    if m := re.match(r"## (.*?)  partner", line):
        label = m.group(1)
    elif m := re.match(r"\s+(before|now): .*?\s+(\d+) us\s+([\d.]+)", line):
        us, over = int(m.group(2)), m.group(3)
        if m.group(1) == "before":
            before, ratio = us, over
        else:
            print(f"{label:45s} {before:5d} -> {us:5d} us  {us / before:.2f}x the time; over partner {ratio} -> {over}")
