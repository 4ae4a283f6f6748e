"""The probes' shared printout: each run's median and its per-round ratios over the first run."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

from kernels import timing


def print_ratios(title: str, names: Sequence[str], runs: Sequence[Callable[[object], object]], rounds: int) -> None:
    """Time ``runs`` in interleaved rounds and print, under ``title``, each one's median (us) and the
    median (min-max) of its per-round ratio over runs[0]."""
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    print(title, flush=True)
    for name, r in zip(names, measured, strict=True):
        ratios = [a / b for a, b in zip(r.medians, measured[0].medians, strict=True)]
        print(
            f"  {name}: {r.median_s * 1e6:.0f} us {statistics.median(ratios):.2f}"
            f" ({min(ratios):.2f}-{max(ratios):.2f})",
            flush=True,
        )
