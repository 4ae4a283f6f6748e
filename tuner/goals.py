"""The performance goals, read off a `losstune bench --report` (its report.json rows).

One table row per (op, dtype), as results/performance.md's goals tables were kept by hand:
roofline % of the contiguous rows at the large sizes, each layout row over its contiguous partner
(timed in the same rounds), the one-shot call over the kernel, the speedup over the vendor
baseline; then every miss, named. The thresholds are the performance issue's:

- from LARGE_NUMEL elements on, the tuned kernel at >= 90% of the copy roofline in float32 and
  >= 80% in float16 and bfloat16, for the full and the 0-d gradient; on a CUDA GPU >= 90% in every
  dtype from 2^26 on (DEVICE_ROOFLINE);
- at every size, at least as fast as the vendor baseline;
- the one-shot call (validation and planning included) at most 2x the kernel at ONESHOT_NUMEL;
- broadcast, transposed (non-contiguous) and summed (KL's input broadcast, its gradient summed
  back) rows within 1.5x of their contiguous partner.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

LARGE_NUMEL = 2**24
ONESHOT_NUMEL = 2**16
ROOFLINE_PCT = {"float32": 90.0, "float16": 80.0, "bfloat16": 80.0}
# A GPU's roofline goal (the performance issue: the device-to-device copy as the roofline, 90% for
# 2^26 elements and up), every dtype: below 2^26 a whole kernel is a few microseconds on an H100
# class card, a launch's own latency.
DEVICE_ROOFLINE = {"cuda": (2**26, 90.0)}
ONESHOT_RATIO = 2.0
LAYOUT_RATIO = 1.5
VENDOR_SPEEDUP = 1.0
# A row's copy (the roofline's yardstick, timed in each of its rounds) whose fastest round ran more
# than this many times its slowest: the host's memory moved while the row was timed, and its ratios
# read the host as much as the kernel. On the Zen 4 of section 99 one row's roofline read 62-102%
# round by round, where a quieter instance of that class gave 100-109% (results/performance.md).
UNSTEADY_COPY = 1.2

# The fields of a report row the goals read (tuner.bench.BenchRow); older reports may lack some.
FIELDS = (
    "op",
    "dtype",
    "numel",
    "reduction",
    "case",
    "tuned_s",
    "oneshot_s",
    "contiguous_s",
    "roofline_pct",
    "speedup_vs_vendor",
)

GRADS = {"none": "full"}  # every other reduction hands a 0-d gradient (mean, sum, batchmean)


def roofline_goal(backend: str, dtype: str) -> tuple[int, float]:
    """(from this many elements on, at least this % of the copy) for a report row's backend and dtype."""
    if backend in DEVICE_ROOFLINE:
        return DEVICE_ROOFLINE[backend]
    return LARGE_NUMEL, ROOFLINE_PCT[dtype]


def _grad(row: Mapping[str, object]) -> str:
    return GRADS.get(str(row["reduction"]), "0-d")


def pow2(numel: int) -> str:
    k = numel.bit_length() - 1
    return f"2^{k}" if numel == 1 << k else str(numel)


@dataclass(frozen=True)
class Miss:
    """One goal a row does not meet: what was asked, what was measured."""

    op: str
    dtype: str
    what: str  # "roofline full 2^24", "transposed 0-d 2^22", ...
    measured: float
    goal: str  # ">= 90%", "<= 1.5x", ...
    # A roofline miss: the kernel's and the copy's GB/s in the row's rounds (reports that have them),
    # so a miss from a slower kernel reads apart from one against a faster copy; any miss: its rounds'
    # range and the row's CPU wait (contention while it was timed), where the report has them.
    detail: str = ""
    # The row's copy, fastest round over slowest (copy_swing), where the report has its rounds.
    copy_swing: float | None = None

    @property
    def unsteady(self) -> bool:
        """Whether the row's copy moved more than UNSTEADY_COPY across its rounds."""
        return self.copy_swing is not None and self.copy_swing > UNSTEADY_COPY

    def line(self) -> str:
        value = reading(self.what, self.measured, self.goal)
        detail = f"; {self.detail}" if self.detail else ""
        return f"{self.op} {self.dtype} {self.what}: {value} (goal {self.goal}{detail})"


def reading(what: str, value: float, goal: str) -> str:
    """A goal's measured value as its table prints it (a roofline's whole %, a ratio's 2 decimals),
    with a digit more while that would read as the goal's own line: 79.9% is a miss of ">= 80%"
    and printed "80%" it read as met (the cfde3e6 report's l1 bfloat16 0-d 2^24)."""
    digits, unit = (0, "%") if what.startswith("roofline") else (2, "x")
    line = float(goal.split()[-1].rstrip("%x"))
    while digits < 4 and value != line and float(f"{value:.{digits}f}") == line:
        digits += 1
    return f"{value:.{digits}f}{unit}"


def _rounds(row: Mapping[str, object], key: str) -> list[float]:
    """A row's per-round values of ``key``; none in reports from before them (a report read through
    pandas has NaN there)."""
    values = row.get(key)
    return [float(v) for v in values] if isinstance(values, (list, tuple)) else []


def spread(values: Sequence[float], fmt: str) -> str:
    """min-max of a row's per-round values (the report prints it beside their median)."""
    return f"{min(values):{fmt}}-{max(values):{fmt}}"


def _rounds_range(values: Sequence[float], fmt: str) -> str:
    """A miss's note of its rounds' range; none for a single round or a report without rounds."""
    return f"rounds {spread(values, fmt)}" if len(values) > 1 else ""


def copy_swing(rounds: Sequence[float]) -> float | None:
    """A row's copy GB/s round by round (bench's copy_gbps_rounds), fastest over slowest; None for
    fewer than two rounds (nothing to compare) and for a report without them."""
    if len(rounds) < 2 or min(rounds) <= 0:
        return None
    return max(rounds) / min(rounds)


def memory_row(backend: str, dtype: str, case: str, numel: int) -> bool:
    """Whether a row is one whose copy's swing reads the host's memory: a layout row (its working set
    out of cache at the report's 2^22 on these hosts) or a contiguous row the roofline goal reads.
    A small row's copy runs in cache for microseconds a launch, and its rounds swing with the timer
    and the scheduler, not with the memory: on the Zen 4 of results/performance.md, section 100,
    the 2^10-2^16 rows' copies swung 1.02-1.13x by median, up to 1.86x, and 192x in one 2^16 row."""
    return case != "contiguous" or numel >= roofline_goal(backend, dtype)[0]


def _copy_moved(swing: float | None) -> str:
    """A miss's note of its row's copy where it moved past UNSTEADY_COPY across the rounds."""
    return f"copy moved {swing:.2f}x across its rounds" if swing is not None and swing > UNSTEADY_COPY else ""


def recorded_wait(value: object) -> float | None:
    """A recorded CPU wait (kernels.timing.cpu_wait: a report row's, a decision's) as a float, or
    None where there is no reading: absent, None (an OS that keeps no scheduler times), or NaN (a
    report read through pandas, where one machine's rows lack the field)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return float(value)


def _waited(row: Mapping[str, object]) -> str:
    """A miss's note of the share of its row's run the process waited for a CPU (bench's cpu_wait:
    other work wanted the host's CPUs); none where the report has no reading."""
    wait = recorded_wait(row.get("cpu_wait"))
    return "" if wait is None else f"CPU wait {wait:.0%}"


def _bandwidths(row: Mapping[str, object]) -> str:
    # A report read through pandas (the dashboard) has NaN where one machine's rows lack a field.
    kernel, copy = (float(row.get(k, "nan")) for k in ("gbps", "copy_gbps"))
    if kernel != kernel or copy != copy:
        return ""
    return f"kernel {kernel:.1f} GB/s, copy {copy:.1f} GB/s"


@dataclass(frozen=True)
class GoalRow:
    """The table row of one (op, dtype); the ratios are tuned launch times, medians of one run."""

    op: str
    dtype: str
    roofline: dict[tuple[str, int], float]  # (full | 0-d, numel) -> % of roofline
    layout: dict[tuple[str, str], float]  # (transposed | broadcast | summed, full | 0-d) -> over contiguous
    oneshot: tuple[float, float]  # min, max of one-shot / kernel at ONESHOT_NUMEL
    vendor: tuple[float, float]  # min, max speedup over the vendor baseline, every row
    layout_numels: tuple[int, ...] = ()  # the sizes of its layout rows: the worst of them is ``layout``'s

    def cells(self, large: Sequence[int]) -> list[str]:
        def pct(grad: str) -> str:
            # "-" too where the report has no row of the large sizes (a layout-only report)
            return (
                "/".join(f"{self.roofline[(grad, n)]:.0f}" if (grad, n) in self.roofline else "-" for n in large) or "-"
            )

        def ratio(case: str, grads: Iterable[str]) -> list[float]:
            return [self.layout[(case, g)] for g in grads if (case, g) in self.layout]

        transposed = " / ".join(f"{r:.2f}" for r in ratio("transposed", ("full", "0-d"))) or "-"
        summed = " / ".join(f"{r:.2f}" for r in ratio("summed", ("full", "0-d"))) or "-"
        broadcast = ratio("broadcast", ("full", "0-d"))
        return [
            self.op,
            self.dtype,
            pct("full"),
            pct("0-d"),
            transposed,
            f"{min(broadcast):.2f}-{max(broadcast):.2f}" if broadcast else "-",
            summed,
            f"{self.oneshot[0]:.2f}-{self.oneshot[1]:.2f}" if self.oneshot[1] else "-",
            f"{self.vendor[0]:.2f}-{self.vendor[1]:.2f}",
        ]


def _order(rows: Sequence[Mapping[str, object]]) -> list[tuple[str, str]]:
    """(op, dtype) pairs in the report's own order."""
    seen: dict[tuple[str, str], None] = {}
    for r in rows:
        seen.setdefault((str(r["op"]), str(r["dtype"])), None)
    return list(seen)


def check_rows(rows: object) -> None:
    """Raise ValueError unless ``rows`` is a list of report rows with every field the goals read."""
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"expected a non-empty list of report rows, got {type(rows).__name__}")
    for i, row in enumerate(rows):
        missing = [f for f in FIELDS if not isinstance(row, Mapping) or f not in row]
        if missing:
            raise ValueError(f"row {i}: expected the fields {', '.join(FIELDS)}; missing {', '.join(missing)}")


def evaluate(rows: Sequence[Mapping[str, object]]) -> tuple[list[GoalRow], list[Miss]]:
    """The goals table and every miss of a report's rows (report.json's ``rows``, check_rows)."""
    table, checked = _evaluate(rows)
    return table, [m for m, met in checked if not met]


def _evaluate(rows: Sequence[Mapping[str, object]]) -> tuple[list[GoalRow], list[tuple[Miss, bool]]]:
    """The goals table, and every goal the rows are checked against (met or not), in row order:
    a Miss holds what was asked and measured either way."""
    table: list[GoalRow] = []
    checked: list[tuple[Miss, bool]] = []

    def check(miss: Miss, met: bool) -> None:
        checked.append((miss, met))

    for op, dtype in _order(rows):
        mine = [r for r in rows if r["op"] == op and r["dtype"] == dtype]
        roofline: dict[tuple[str, int], float] = {}
        layout: dict[tuple[str, str], float] = {}
        layout_numels: set[int] = set()
        oneshot: list[float] = []
        for r in mine:
            numel, grad, case = int(r["numel"]), _grad(r), str(r["case"])
            tuned = float(r["tuned_s"])
            memory = memory_row(str(r.get("backend", "cpu")), dtype, case, numel)
            swing = copy_swing(_rounds(r, "copy_gbps_rounds")) if memory else None
            waited = "; ".join(d for d in (_waited(r), _copy_moved(swing)) if d)
            large, pct = roofline_goal(str(r.get("backend", "cpu")), dtype)
            if case == "contiguous" and numel >= large:
                roofline[(grad, numel)] = float(r["roofline_pct"])
                what, goal = f"roofline {grad} {pow2(numel)}", f">= {pct:.0f}%"
                met = roofline[(grad, numel)] >= pct
                rounds = _rounds_range(_rounds(r, "roofline_pct_rounds"), ".0f")
                detail = "; ".join(d for d in (_bandwidths(r), rounds, waited) if d)
                check(Miss(op, dtype, what, roofline[(grad, numel)], goal, detail, swing), met)
            if case != "contiguous" and float(r["contiguous_s"]) > 0:
                # Round by round where the report has the rounds (the pair timed in each); else the
                # ratio of the two medians.
                paired = _rounds(r, "contiguous_x_rounds")
                over = float(r["contiguous_x"]) if paired else tuned / float(r["contiguous_s"])
                # A report with layout rows at several sizes (bench --report --layout-size): the
                # table's cell is the worst of them; each size is checked on its own.
                layout[(case, grad)] = max(over, layout.get((case, grad), over))
                layout_numels.add(numel)
                what = f"{case} {grad} {pow2(numel)}"
                detail = "; ".join(d for d in (_rounds_range(paired, ".2f"), waited) if d)
                check(Miss(op, dtype, what, over, f"<= {LAYOUT_RATIO}x", detail, swing), over <= LAYOUT_RATIO)
            if case == "contiguous" and numel == ONESHOT_NUMEL:
                oneshot.append(float(r["oneshot_s"]) / tuned)
                what = f"one-shot / kernel {grad} {pow2(numel)}"
                ratio = oneshot[-1]
                check(Miss(op, dtype, what, ratio, f"<= {ONESHOT_RATIO}x", waited, swing), ratio <= ONESHOT_RATIO)
            what, speedup = f"x vendor {case} {grad} {pow2(numel)}", float(r["speedup_vs_vendor"])
            check(Miss(op, dtype, what, speedup, f">= {VENDOR_SPEEDUP}x", waited, swing), speedup >= VENDOR_SPEEDUP)
        speedups = [float(r["speedup_vs_vendor"]) for r in mine]
        table.append(
            GoalRow(
                op,
                dtype,
                roofline,
                layout,
                (min(oneshot), max(oneshot)) if oneshot else (0.0, 0.0),
                (min(speedups), max(speedups)),
                tuple(sorted(layout_numels)),
            )
        )
    return table, checked


def format_goals(table: Sequence[GoalRow], misses: Sequence[Miss]) -> str:
    """evaluate's result as the markdown table performance.md keeps, then the misses, one per line."""
    large = sorted({n for g in table for _, n in g.roofline})
    sizes = " / ".join(pow2(n) for n in large) or "large"
    layout_sizes = sorted({n for g in table for n in g.layout_numels})
    worst = f" (worst of {', '.join(map(pow2, layout_sizes))})" if len(layout_sizes) > 1 else ""
    head = [
        "op",
        "dtype",
        f"full {sizes}",
        f"0-d {sizes}",
        f"transposed full / 0-d{worst}",
        f"broadcast{worst}",
        f"summed full / 0-d{worst}",
        f"one-shot / kernel {pow2(ONESHOT_NUMEL)}",
        "x vendor (min-max)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(g.cells(large)) + " |" for g in table]
    lines.append("")
    unsteady = sum(m.unsteady for m in misses)
    moved = f" ({unsteady} on rows whose copy moved over {UNSTEADY_COPY:.2f}x across their rounds)" if unsteady else ""
    lines.append(f"{len(misses)} goal(s) not met{moved}" + (":" if misses else ""))
    lines += [f"- {m.line()}" for m in misses]
    return "\n".join(lines)


@dataclass(frozen=True)
class Verdict:
    """One goal read in each of a series of reports (one machine, run after run), in their order."""

    op: str
    dtype: str
    what: str
    goal: str
    measured: tuple[float, ...]  # NaN where a report has no row for it
    missed: int  # the reports that miss it

    @property
    def read(self) -> int:
        """The reports that have a row for it (NaN is the only value unequal to itself)."""
        return sum(v == v for v in self.measured)

    def line(self) -> str:
        def value(v: float) -> str:
            return "-" if v != v else reading(self.what, v, self.goal)

        where = "" if self.missed == self.read else f"; missed in {self.missed} of {self.read}"
        return f"{self.op} {self.dtype} {self.what}: {', '.join(map(value, self.measured))} (goal {self.goal}{where})"


def across(reports: Sequence[Sequence[Mapping[str, object]]]) -> tuple[list[Verdict], int]:
    """Every goal missed in at least one of ``reports`` (each a report's rows, check_rows), with its
    reading in each, in first-seen order; and the count of goals met in every report that reads them.

    On a shared host the same kernels and configs give verdicts that move run to run near a
    goal's line (results/performance.md, section 42). A goal missed in every run is the kernel's;
    one missed in some is within the host's spread of it."""
    readings: dict[tuple[str, str, str], tuple[str, list[float], list[bool]]] = {}
    for i, rows in enumerate(reports):
        for miss, met in _evaluate(rows)[1]:
            goal, values, mets = readings.setdefault(
                (miss.op, miss.dtype, miss.what), (miss.goal, [float("nan")] * len(reports), [True] * len(reports))
            )
            if mets[i]:  # a goal a report reads twice keeps its first miss
                values[i], mets[i] = miss.measured, met
    verdicts = [
        Verdict(op, dtype, what, goal, tuple(values), mets.count(False))
        for (op, dtype, what), (goal, values, mets) in readings.items()
        if not all(mets)
    ]
    return verdicts, len(readings) - len(verdicts)


def format_across(verdicts: Sequence[Verdict], met: int, count: int) -> str:
    """across's result: the goals missed in every one of the ``count`` reports; those missed in every
    report that reads them, where some reports have no row for them (a row a later report added, or
    one an earlier report had and a later dropped: one reading or a few is not a run-to-run verdict);
    then those missed in some."""
    always = [v for v in verdicts if v.missed == v.read == count]
    partly = [v for v in verdicts if v.missed == v.read < count]
    some = [v for v in verdicts if v.missed < v.read]
    lines = [f"missed in every report: {len(always)}"] + [f"- {v.line()}" for v in always]
    lines += ["", f"missed in every report that has the row, fewer than {count}: {len(partly)}"]
    lines += [f"- {v.line()}" for v in partly]
    lines += ["", f"missed in some of the {count} reports: {len(some)}"] + [f"- {v.line()}" for v in some]
    lines += ["", f"met in every report: {met} goal(s)"]
    return "\n".join(lines)
