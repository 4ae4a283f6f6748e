"""What the compiled-loop cache saw in one CI test run: which loop signatures were compiled, by which
process and test file, for how long, and how many were compiled twice by two processes at once.

Input: jitlog.txt.gz, written by a run of README's test command (the compiled-loop cache started
empty, as .ci/run starts it) with log_patch.diff applied, which appends a line to
$LOSSTUNE_JIT_CACHE_LOG at each cache miss (a compile follows) and each save (the compile ended):
``time pid miss|save key-digest qualname test``. A signature's compile time is its save's time less
the same process's last miss of that key before it. Tainted processes (a test that patched a global
the loops read) and loops never given the cache compile without a save: they are not counted here.

Run: python analyze.py  (prints what summary.txt holds)."""

from __future__ import annotations

import collections
import gzip
from pathlib import Path

HERE = Path(__file__).parent


def main() -> None:
    misses: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
    saves: dict[str, list[tuple[float, str, str, str]]] = collections.defaultdict(list)
    with gzip.open(HERE / "jitlog.txt.gz", "rt") as f:
        for line in f:
            stamp, pid, what, key, qualname, test = line.split()[:6]
            if what == "miss":
                misses[key].append((float(stamp), pid))
            else:
                saves[key].append((float(stamp), pid, qualname.split("<locals>.")[-1], test.split("::")[0]))
    total = twice = 0.0
    by_file: collections.Counter[str] = collections.Counter()
    by_loop: collections.Counter[str] = collections.Counter()
    for key, saved in saves.items():
        for i, (stamp, pid, loop, test) in enumerate(sorted(saved)):
            before = [t for t, p in misses[key] if p == pid and t <= stamp]
            seconds = stamp - max(before) if before else 0.0
            total += seconds
            twice += seconds if i else 0.0
            by_file[test] += seconds
            by_loop[loop] += seconds
    again = sum(len(v) - 1 for v in saves.values() if len(v) > 1)
    count = sum(len(v) for v in saves.values())
    print(f"{count} saves of {len(saves)} distinct loop signatures, {total:.0f} s of compile")
    print(f"compiled again by a second process: {again} signatures, {twice:.0f} s")
    print("by test file (s):")
    for name, seconds in by_file.most_common():
        print(f"  {seconds:7.1f}  {name}")
    print("by loop (s):")
    for name, seconds in by_loop.most_common():
        print(f"  {seconds:7.1f}  {name}")


if __name__ == "__main__":
    main()
