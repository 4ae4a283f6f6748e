"""The vector loop bodies of KL log_target's 0-d contiguous loop (the serial scalar_grad build, as
loops.py times it): float16 (half) and bfloat16 (narrow, coarse). Prints each loop that holds the
exp's vscalefps: its instructions, counted by mnemonic. Not part of the package.

    python asm.py
"""

from __future__ import annotations

import collections
import re
import warnings

from loops import loop_args, loop_sets  # beside this file: the sets and arguments loops.py times


def vector_loops(asm: str, marks: tuple[str, ...] = ("vscalefps",)) -> list[list[str]]:
    """Each backward-jumping block range [label .. jump to label] of under 400 instructions that
    holds one of ``marks`` (default: the exp's vscalefps). walk_parts/asm_walk.py reads it too."""
    lines = [ln.rstrip() for ln in asm.splitlines()]
    where = {m.group(1): i for i, ln in enumerate(lines) if (m := re.match(r"^(\.LBB\S+):", ln))}
    found = []
    for i, ln in enumerate(lines):
        m = re.match(r"^\s+j\w+\s+(\.LBB\S+)", ln)
        if m and m.group(1) in where and where[m.group(1)] < i:
            body = [
                x.strip()
                for x in lines[where[m.group(1)] : i + 1]
                if x.strip() and not x.strip().startswith(("#", "."))
            ]
            if any(mark in x for x in body for mark in marks) and len(body) < 400:
                found.append(body)
    return found


def main() -> None:
    warnings.simplefilter("ignore")
    for name, (dtype, loops) in loop_sets().items():
        keep, args = loop_args(1 << 12, dtype, 1)
        fn = loops.scalar_grad[0]
        fn(*args, False)
        asm = "\n".join(fn.inspect_asm().values())
        for body in vector_loops(asm):
            ops = collections.Counter(x.split()[0] for x in body)
            print(f"## {name}: {len(body)} instructions")
            print("   " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])))
            for x in body:
                print("     " + x)
        del keep


if __name__ == "__main__":
    main()
