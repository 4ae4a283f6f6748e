"""Does tuner.machine.torch_pages say what torch's allocator does? For each THP_MEM_ALLOC_ENABLE
value, a fresh process allocates and touches a 64 MiB tensor, and reads its own AnonHugePages
(/proc/self/smaps_rollup) beside torch_pages()'s answer and any warning torch printed.
Usage: python pages_probe.py (from the repository root, or with it on PYTHONPATH)"""

import os
import subprocess
import sys

CHILD = """
import re, torch
from tuner import machine
t = torch.empty(1 << 24)  # 64 MiB of float32
t.fill_(1.0)  # touch every page
rollup = open("/proc/self/smaps_rollup").read()
kb = int(re.search(r"AnonHugePages:\\s+(\\d+) kB", rollup).group(1))
print(f"{kb} kB", machine.torch_pages())
"""

for value in (None, "0", "1", "1x", " 1", "2"):
    env = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    if value is not None:
        env["THP_MEM_ALLOC_ENABLE"] = value
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
    warned = "warned" if "THP_MEM_ALLOC_ENABLE" in done.stderr else "no warning"
    print(f"THP_MEM_ALLOC_ENABLE={value!r:6} AnonHugePages {done.stdout.strip()}; {warned}")
