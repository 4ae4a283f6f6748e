"""Section 68 of results/performance.md: KL log_target's loops on the Zen 5 with the checked twin
(one power of two and a flag, in the loops apart, bfloat16 stored without the subnormal fix-up)
against the loops before it (``LOSSTUNE_CPU_CHECKED=0``: inline, vscalefps, the fixed-up store).

Each round runs ``losstune bench --json`` once per build, in alternating processes (the gates are
read at import), and prints each row's kernel time in every round, the medians' ratio new/old.
Both builds take the same configs: the table's entries of the edited loops are stale until
restamped or re-tuned, so both read the default config.

    python checked_ab.py ROUNDS -- <losstune bench arguments>
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys


def run(args: list[str], checked: bool | None) -> list[dict]:
    env = dict(os.environ)
    env.pop("LOSSTUNE_CPU_CHECKED", None)
    if checked is not None:
        env["LOSSTUNE_CPU_CHECKED"] = "1" if checked else "0"
    done = subprocess.run(["losstune", "bench", *args, "--json"], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    rounds = int(sys.argv[1])
    args = sys.argv[sys.argv.index("--") + 1 :]
    times: dict[tuple, dict[str, list[float]]] = {}
    for _ in range(rounds):
        for name, checked in (("old", False), ("new", None)):
            for row in run(args, checked):
                key = (row["op"], row["dtype"], row["numel"], row["case"], row["reduction"])
                times.setdefault(key, {}).setdefault(name, []).append(row["tuned_s"] * 1e6)
    print(f"# losstune bench {' '.join(args)}; {rounds} rounds, old = LOSSTUNE_CPU_CHECKED=0, new = the default")
    for key, t in sorted(times.items()):
        ratio = statistics.median(t["new"]) / statistics.median(t["old"])
        old = " ".join(f"{v:.0f}" for v in t["old"])
        new = " ".join(f"{v:.0f}" for v in t["new"])
        print(f"{' '.join(map(str, key)):<50} old us {old:<24} new us {new:<24} new/old {ratio:.2f}")


if __name__ == "__main__":
    main()
