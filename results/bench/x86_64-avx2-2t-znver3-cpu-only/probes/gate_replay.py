"""Section 80: the control gate's decisions beside what the gate before it would have decided.

Since 53571ff each study's finalists time a control (the baseline's config again) and the tuner
keeps the winner when its median gains MIN_GAIN (2% until section 81) and its per-round ratios rank below the control's
(tuner.study.decide). The gate before it kept a winner only if every round's ratio was at or under
1 - EVERY_ROUND (2%). Both read the same recorded rounds (``round_ratios``), so the old gate replays
exactly on each decision taken with a control. This prints, for every study of the journal whose
latest decision recorded ``control_ratios`` (filtered by a substring of the study's name), the
winner's ratios, the control's, the chance ("-" where the decision recorded none: the baseline
itself was fastest), and both gates' verdicts, then counts where they differ.

    python results/bench/x86_64-avx2-2t-znver3-cpu-only/probes/gate_replay.py [NAME_SUBSTRING]

Read-only: it opens the journal (results/tuning/journal.log) and writes nothing. Not part of the package.
"""

from __future__ import annotations

import statistics
import sys
from collections import Counter

from tuner.study import study_rows

# the every-round gate's bar: MIN_GAIN while that gate stood (until section 80)
EVERY_ROUND = 0.02


def verdicts(final: dict[str, object]) -> tuple[bool, bool]:
    """(the every-round gate's keep, the control gate's keep) on one decision's recorded rounds."""
    ratios = final["round_ratios"]
    assert isinstance(ratios, list)
    return max(ratios) <= 1.0 - EVERY_ROUND, bool(final["switched"])


def main() -> None:
    part = sys.argv[1] if len(sys.argv) > 1 else ""
    rows = [r for r in study_rows(None) if part in str(r["study"]) and "control_ratios" in (r.get("final") or {})]
    head = "| case | baseline | winner over baseline: median (each round) | control (each round) | chance |"
    print(f"{head} every round | control |")
    print("|---|---|---|---|---|---|---|")
    tally: Counter[tuple[bool, bool]] = Counter()
    for r in sorted(rows, key=lambda r: str(r.get("case"))):
        final = r["final"]
        ratios, control = final["round_ratios"], final["control_ratios"]
        old, new = verdicts(final)
        tally[(old, new)] += 1
        each = " ".join(f"{v:.2f}" for v in ratios)
        ctl = " ".join(f"{v:.2f}" for v in control)
        keep = {True: "keep", False: "-"}
        print(
            f"| {r.get('case')} | {final['baseline']} | {statistics.median(ratios):.2f} ({each}) | {ctl} | "
            f"{'-' if final['chance'] is None else format(final['chance'], '.3f')} | {keep[old]} | {keep[new]} |"
        )
    print(f"\n{len(rows)} decisions with a control")
    for (old, new), n in sorted(tally.items()):
        print(f"- every-round gate {'keeps' if old else 'vetoes'}, control gate {'keeps' if new else 'vetoes'}: {n}")


if __name__ == "__main__":
    main()
