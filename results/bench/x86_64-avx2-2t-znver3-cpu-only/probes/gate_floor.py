"""Section 81: the control gate at a 2% median floor and at MIN_GAIN, on the journal's recorded rounds.

Section 80's gate kept a winner whose median round ratio was 0.98 or under and whose ratios ranked
below the control's at a chance of ALPHA or less (tuner.study.decide); section 81 raised the floor
to MIN_GAIN. Both read only a decision's recorded ``round_ratios`` and ``control_ratios``, so both
replay exactly on every decision taken with a control. This prints each decision whose verdict the
floor changes, then the tally; it first checks that the replay at 2% gives the verdict the tuner
recorded, so a change of the gate's other half would show here as a mismatch, not as a floor's effect.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/gate_floor.py [NAME_SUBSTRING]

Read-only: it opens the journal (results/tuning/journal.log) and writes nothing. Not part of the package.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter

from tuner.study import ALPHA, MIN_GAIN, chance, study_rows

# section 80's floor, under which every decision with a control in the journal was taken
RECORDED_FLOOR = 0.02


def keeps(ratios: list[float], control: list[float], floor: float) -> bool:
    """The control gate's verdict (decide's) at a median floor of ``floor``."""
    return statistics.median(ratios) <= 1.0 - floor and chance(ratios, control) <= ALPHA


def main() -> None:
    part = sys.argv[1] if len(sys.argv) > 1 else ""
    rows = [r for r in study_rows(None) if part in str(r["study"]) and "control_ratios" in (r.get("final") or {})]
    tally: Counter[tuple[bool, bool]] = Counter()
    medians: list[float] = []
    floors = f"{RECORDED_FLOOR:.0%} | {MIN_GAIN:.0%}"
    print(f"| case | winner over baseline: median (each round) | control (each round) | chance | {floors} |")
    print("|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: str(r.get("case"))):
        final = r["final"]
        ratios, control = final["round_ratios"], final["control_ratios"]
        old, new = keeps(ratios, control, RECORDED_FLOOR), keeps(ratios, control, MIN_GAIN)
        assert old == bool(final["switched"]), f"{r['study']}: the replay at 2% is not the recorded verdict"
        tally[(old, new)] += 1
        if old:
            medians.append(statistics.median(ratios))
        if old != new:
            each = " ".join(f"{v:.2f}" for v in ratios)
            ctl = " ".join(f"{v:.2f}" for v in control)
            read = f"{chance(ratios, control):.3f}"
            print(f"| {r.get('case')} | {statistics.median(ratios):.2f} ({each}) | {ctl} | {read} | keep | - |")
    print(f"\n{len(rows)} decisions with a control; each replay at {RECORDED_FLOOR:.0%} is the verdict recorded")
    for (old, new), n in sorted(tally.items()):
        verdict = {True: "keeps", False: "vetoes"}
        print(f"- {RECORDED_FLOOR:.0%} floor {verdict[old]}, {MIN_GAIN:.0%} floor {verdict[new]}: {n}")
    if medians:
        span = f"{min(medians):.2f}-{max(medians):.2f}"
        print(f"- the median round ratios of the decisions kept at {RECORDED_FLOOR:.0%}: {span}")


if __name__ == "__main__":
    main()
