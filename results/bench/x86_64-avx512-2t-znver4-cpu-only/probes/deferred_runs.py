"""Section 50 of results/performance.md: the deferred transposed walk (Tiling.defer_out) of a
compute-bound formula built once per kind of pass (a)'s runs (cpu_loops.transposed_run) against the
one build holding all three run loops that it replaced.

For each OP:DTYPE:REDUCTION at 2^n elements, in interleaved rounds in one process: the contiguous
case (this host's tables), the transposed case with the table's config, and the transposed case
with the deferred walk (the table's config where it defers, else its twin with defer_out set and
transpose_in cleared), once with the loops at OLD (loaded from git beside today's, as tuner.restamp
does; the same planner, configs and tensors) and once with today's. Medians (us) and each one's
per-round ratio over the contiguous case. Old and new outputs are checked bitwise equal first. Not
part of the package: run by hand, as

    python deferred_runs.py 22 7 kl_div-log:bfloat16:none,... [CONFIG]

CONFIG (a Tiling as JSON): the deferred config to time, for every row, in place of the table's twin
(for a row whose entry the edit left stale, and so skipped, the one it had frozen).
"""

from __future__ import annotations

import dataclasses
import json
import sys

import torch
from _rounds import backend_at, print_ratios, row_cases

from kernels import backends
from kernels.tiling import Tiling

OLD = "3023be7"  # the last commit with one deferred walk for every kind of run


def main() -> None:
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    old = backend_at(OLD)
    new = backends.get("cpu")
    for spec in sys.argv[3].split(","):
        contiguous, case, dtype, (tg, tx, tt) = row_cases(spec, n)
        table = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu")
        cfg = dataclasses.replace(table.config, defer_out=True, transpose_in=False)
        if len(sys.argv) > 4:
            cfg = Tiling.from_dict(json.loads(sys.argv[4]))
        if cfg not in table.space:
            print(f"{spec}: {cfg.short()} is not in the space (no deferred walk here)", flush=True)
            continue
        ex = case.phase_one(tg, tx, tt, case.out_like(tx), "cpu", config=cfg)
        bits = torch.int16 if dtype.itemsize == 2 else torch.int32
        new.launch(ex)
        mine = ex.out.clone()
        old.launch(ex)
        assert torch.equal(mine.view(bits), ex.out.view(bits)), spec
        names = [
            f"contiguous {contiguous.config.short()}",
            f"table {table.config.short()}",
            f"deferred {cfg.short()}, one build ({OLD})",
            "deferred, a build per run kind",
        ]
        pairs = ((new, contiguous), (new, table), (old, ex), (new, ex))
        runs = [lambda _, b=b, e=e: b.launch(e) for b, e in pairs]
        print_ratios(spec, names, runs, rounds)


if __name__ == "__main__":
    main()
