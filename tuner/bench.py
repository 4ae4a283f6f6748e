"""Tuned vs default vs vendor baseline, with GB/s and % of the copy roofline measured in the same run."""

from __future__ import annotations

import dataclasses
import statistics
import warnings
from collections.abc import Callable, Collection
from dataclasses import dataclass

import torch

from kernels import dispatch, timing
from kernels.executor import Executor
from kernels.modes import Op
from tuner.goals import GRADS, LARGE_NUMEL, UNSTEADY_COPY, copy_swing, memory_row, pow2, spread
from tuner.problems import Case, InputLayout, parse_shape


@dataclass(frozen=True)
class BenchRow:
    """One long-format result row; the field order is the column order."""

    op: str
    dtype: str
    shape: str
    reduction: str
    numel: int
    backend: str
    device: str
    tuned_config: str
    config_source: str
    tuned_s: float
    tuned_p20_s: float
    tuned_p80_s: float
    default_s: float
    vendor_s: float
    gbps: float
    # The median over rounds of each round's kernel GB/s over its copy's (the pair timed in one round,
    # so a slow spell of the host hits both): roofline_pct_rounds, one a round. Reports before them
    # have the ratio of the two medians (gbps / copy_gbps) here, and no rounds.
    roofline_pct: float
    copy_gbps: float
    speedup_vs_default: float
    speedup_vs_vendor: float
    oneshot_s: float  # the public function with validation, planning and config lookup, out given
    case: str = "contiguous"
    # A layout row's contiguous partner (same op, dtype, size, reduction), its tuned launch timed in
    # the same interleaved rounds: the layout's cost is their ratio. 0 for a contiguous row.
    contiguous_s: float = 0.0
    # The layout's cost round by round (tuned / partner, each round's medians) and their median: a
    # shared host's slow spells move a memory-bound contiguous loop more than a transposed walk, so
    # a ratio of two medians taken over different rounds swung past the goal's line
    # (results/performance.md, section 45). Empty / 0 for a contiguous row and in older reports.
    contiguous_x_rounds: tuple[float, ...] = ()
    contiguous_x: float = 0.0
    roofline_pct_rounds: tuple[float, ...] = ()
    # The share of the row's runnable time the process waited for a CPU (kernels.timing.cpu_wait),
    # over all its rounds: at timing.BUSY_WAIT and up, other work wanted the host's CPUs while the
    # row was timed. None where the OS does not say, and in older reports.
    cpu_wait: float | None = None
    # PyTorch's own kernel into a given out (problems.Case.baseline_into), timed in the same rounds:
    # the vendor's call without the allocation and zero-fill of its result. 0 where PyTorch has no
    # such kernel (L1, KL), where it failed its check (_vendor_into) and in older reports.
    vendor_out_s: float = 0.0
    # The copy's GB/s round by round (copy_gbps is their median's): a row whose copy moved past
    # goals.UNSTEADY_COPY across its rounds was timed while the host's memory moved, which the CPU
    # wait does not see (results/performance.md, section 99). Empty in older reports.
    copy_gbps_rounds: tuple[float, ...] = ()
    # How the rounds took their samples (timing.Grain): "launch" for the report's roofline rows on
    # the CPU since section 100, "run" otherwise and in older reports.
    grain: str = timing.Grain.RUN.value


def _public(case: Case) -> Callable[..., torch.Tensor]:
    from kernels.ops import kl_div, l1, mse

    red = case.reduction
    if case.op is Op.MSE:
        return lambda g, x, t, out, backend: mse.mse_loss_backward(g, x, t, red, out=out, backend=backend)
    if case.op is Op.L1:
        return lambda g, x, t, out, backend: l1.l1_loss_backward(g, x, t, red, out=out, backend=backend)
    log = case.log_target
    return lambda g, x, t, out, backend: kl_div.kl_div_backward(g, x, t, red, log_target=log, out=out, backend=backend)


def _checked(
    case: Case, backend: str, device: torch.device, default: bool
) -> tuple[tuple[torch.Tensor, ...], tuple[Executor, ...]]:
    """Seeded (g, x, t, out) of ``case`` and its tuned executor (and the default's, if asked) on
    them, each launched once and compared with the reference: a wrong kernel must not post a fast
    number."""
    g, x, t = case.inputs(device)
    out = case.out_like(x)
    tuned = case.phase_one(g, x, t, out, backend)
    executors = (tuned, case.phase_one(g, x, t, out, backend, tuned.space.default)) if default else (tuned,)
    ref = case.reference(g, x, t)
    for ex in executors:
        dispatch.run(ex)
        wrong = case.mismatch(out, ref, g, x, t)
        if wrong:
            raise AssertionError(f"{case.label()} {ex.config.short()} is wrong: {wrong}")
    return (g, x, t, out), executors


def _vendor_into(
    case: Case,
    g: torch.Tensor,
    x: torch.Tensor,
    t: torch.Tensor,
    out: torch.Tensor,
    vendor: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
) -> Callable[[int], object] | None:
    """The run of PyTorch's own kernel into a given out (Case.baseline_into), into a spare out, not
    ours: our kernel's checked output is never its target. None where PyTorch has none, and where it
    fails or writes other values than its allocating call returns, once, before any timing: a row
    then goes without the column (a warning says why) rather than the report stopping mid-run, or
    printing a ratio over some other computation."""
    into = case.baseline_into()
    if into is None:
        return None
    spare = torch.empty_like(out)
    try:
        into(g, x, t, spare)
        same = torch.equal(spare, vendor(g, x, t))
    except (RuntimeError, NotImplementedError, TypeError) as e:
        warnings.warn(f"{case.label()}: PyTorch's kernel into a given out failed ({e}); no x vendor out", stacklevel=3)
        return None
    if not same:
        warnings.warn(
            f"{case.label()}: PyTorch's kernel into a given out wrote other values; no x vendor out", stacklevel=3
        )
        return None
    return lambda _: into(g, x, t, spare)


def bench_case(
    case: Case,
    backend: str,
    *,
    min_time_s: float = 0.1,
    rounds: int = 3,
    seed: int = 0,
    partner: Case | None = None,
    grain: timing.Grain = timing.Grain.RUN,
) -> BenchRow:
    """Tuned, default, vendor, the one-shot public call and the size-matched copy (the roofline),
    timed in the same interleaved rounds (``grain``: timing.Grain); ``partner``: a contiguous case
    timed beside them too."""
    device = timing.backend_device(backend)
    (g, x, t, out), (tuned, default) = _checked(case, backend, device, default=True)
    launch = dispatch.run  # what the one-shot call launches through (a plan's launcher where it has one)
    vendor = case.baseline()
    public = _public(case)
    nbytes = timing.bytes_moved(case.read_tensors(g, x, t), out)
    copy, copy_bytes = timing.copy_probe(str(device), nbytes)
    runs = [
        lambda _: launch(tuned),
        lambda _: launch(default),
        lambda _: vendor(g, x, t),
        lambda _: public(g, x, t, out, backend),
        copy,
    ]
    if partner is not None:
        _, (contiguous,) = _checked(partner, backend, device, default=False)
        runs.append(lambda _: launch(contiguous))
    into, into_at = _vendor_into(case, g, x, t, out, vendor), len(runs)
    if into is not None:
        runs.append(into)
    # Every run is timed launch-free (the device's work alone) but the one-shot call, whose host
    # side (validation, planning, the config lookup, the launch) is what it measures.
    spans = [timing.Span.DEVICE] * len(runs)
    spans[3] = timing.Span.CALL
    sched = timing.sched_times()
    timed = timing.interleaved(runs, device, rounds=rounds, min_time_s=min_time_s, seed=seed, spans=spans, grain=grain)
    wait = timing.cpu_wait(sched, timing.sched_times())
    tuned_t = timed[0].summary()
    med = [t.median_s for t in timed]
    copy_bps = copy_bytes / med[4]
    gbps = nbytes / med[0] / 1e9
    kernel, copy_t = timed[0].medians, timed[4].medians
    roofline = tuple(100 * (nbytes / k) / (copy_bytes / c) for k, c in zip(kernel, copy_t, strict=True))
    layout = tuple(k / p for k, p in zip(kernel, timed[5].medians, strict=True)) if partner is not None else ()
    return BenchRow(
        case.op.value + ("-log" if case.log_target else ""),
        tuned.key.dtype,
        "x".join(map(str, case.shape)) or "0d",
        case.reduction.name.lower(),
        case.numel,
        backend,
        tuned.device,
        tuned.config.short(),
        tuned.config_source,
        med[0],
        tuned_t.p20_s,
        tuned_t.p80_s,
        med[1],
        med[2],
        gbps,
        statistics.median(roofline),
        copy_bps / 1e9,
        med[1] / med[0],
        med[2] / med[0],
        med[3],
        case.layout.value,
        med[5] if partner is not None else 0.0,
        layout,
        statistics.median(layout) if layout else 0.0,
        roofline,
        wait,
        med[into_at] if into is not None else 0.0,
        tuple(copy_bytes / c / 1e9 for c in copy_t),
        grain.value,
    )


def _aligned(lines: list[tuple[object, ...]]) -> list[str]:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(lines[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]


def format_table(rows: list[BenchRow]) -> str:
    head = (
        "op",
        "dtype",
        "shape",
        "red",
        "tuned us",
        "p20-p80",
        "default us",
        "vendor us",
        "GB/s",
        "copy GB/s",
        "roofline",
        "x default",
        "x vendor",
        "config",
    )
    lines = [head]
    for r in rows:
        lines.append(
            (
                r.op,
                r.dtype,
                r.shape,
                r.reduction,
                f"{r.tuned_s * 1e6:.1f}",
                f"{r.tuned_p20_s * 1e6:.1f}-{r.tuned_p80_s * 1e6:.1f}",
                f"{r.default_s * 1e6:.1f}",
                f"{r.vendor_s * 1e6:.1f}",
                f"{r.gbps:.2f}",
                f"{r.copy_gbps:.2f}",
                f"{r.roofline_pct:.0f}%",
                f"{r.speedup_vs_default:.2f}",
                f"{r.speedup_vs_vendor:.2f}",
                r.tuned_config,
            )
        )
    text = _aligned(lines)
    if rows:
        text.append(
            "roofline: copy bandwidth of torch copy_ at each case's working set (copy GB/s), timed in the"
            f" case's own rounds on {rows[0].backend}/{rows[0].device}"
        )
    return "\n".join(text)


def as_dicts(rows: list[BenchRow]) -> list[dict[str, object]]:
    return [dataclasses.asdict(r) for r in rows]


REPORT_SIZES = tuple(f"2^{k}" for k in range(10, 27, 2))
REPORT_LAYOUT_SIZE = "2^22"


def report_rows(
    cases: list[Case],
    backend: str,
    *,
    min_time_s: float = 0.05,
    rounds: int = 3,
    layouts: Collection[InputLayout] = tuple(InputLayout),
    goal_rounds: int | None = None,
    goal_numel: int = LARGE_NUMEL,
    layout_numels: Collection[int] | None = None,
) -> list[BenchRow]:
    """The size sweep of the contiguous ``cases``, then broadcast and transposed forms of those of
    ``layout_numels`` elements (default REPORT_LAYOUT_SIZE; and KL's summed form), each timed beside
    its contiguous partner, size by size in the order given.

    ``layouts`` picks the rows: without CONTIGUOUS the sweep's rows are left out, and the other
    layouts' rows are still timed beside their partners (the 16-bit transposed rows of four ops
    alone took 355 s on the Zen 3, performance.md section 73, where the whole 2^22 report of those
    cases ran past 12 minutes).

    The rows a goal reads a ratio from take ``goal_rounds`` rounds (default ``rounds``): the layout
    rows (x over the partner) and the contiguous rows of ``goal_numel`` elements and up (% of the
    copy). With 3 rounds a paired median is the middle of three ratios, and on this shared host one
    round's ratio swung 73-106% for a row whose medians alone read 99% (performance.md, section 45).

    On the CPU those contiguous rows take their samples launch by launch (roofline_grain): their
    working sets are out of every cache, and a round's kernel and copy then pair."""
    goal_rounds = goal_rounds or rounds
    rows = [
        bench_case(
            c,
            backend,
            min_time_s=min_time_s,
            rounds=goal_rounds if c.numel >= goal_numel else rounds,
            grain=grain_for(backend, c.numel, goal_numel),
        )
        for c in cases
        if InputLayout.CONTIGUOUS in layouts
    ]
    sizes = layout_numels if layout_numels is not None else parse_shape(REPORT_LAYOUT_SIZE)
    for c in (c for size in sizes for c in cases if c.numel == size):
        if c.layout is InputLayout.CONTIGUOUS:
            rows += [
                bench_case(
                    dataclasses.replace(c, layout=lay),
                    backend,
                    min_time_s=min_time_s,
                    rounds=goal_rounds,
                    partner=c,
                )
                for lay in (InputLayout.BROADCAST, InputLayout.TRANSPOSED, InputLayout.SUMMED)
                if lay in layouts and (lay is not InputLayout.SUMMED or c.op is Op.KL_DIV)
            ]
    return rows


def roofline_grain(backend: str) -> timing.Grain:
    """The grain of a report's roofline rows: launch by launch on the CPU, where the copy moved 1.5x
    (median) across a row's rounds and their run-by-run pairs did not cancel it (section 100); run
    by run elsewhere: a lent GPU has no neighbours on its memory (the H200's copy read 4.09-4.22
    TB/s across its report's rows, section 58), and launch by launch has not been run on one."""
    return timing.Grain.LAUNCH if backend == "cpu" else timing.Grain.RUN


def grain_for(backend: str, numel: int, goal_numel: int = LARGE_NUMEL) -> timing.Grain:
    """The grain of rounds timing ``numel`` elements: roofline_grain from ``goal_numel`` on, run by
    run below it. The size bound is measured, not caution: at 2^22, where a 16-bit case's tensors
    fit the Zen 5's 32 MiB L3, launch by launch left each launch the other runs' data in the cache,
    and a transposed row's contiguous partner took 2-4x its run-by-run time (mse float16 0-d: 656
    against 208 us), the layout's x fell from 1.57-1.73 to 0.87-0.95, and its swing across rounds
    did not narrow (section 101): a change of what is timed, not a steadier reading of it."""
    return roofline_grain(backend) if numel >= goal_numel else timing.Grain.RUN


def format_report(rows: list[BenchRow]) -> str:
    """op, dtype, case, tuned / default / vendor medians, GB/s, % of roofline, speedup over vendor
    (and over PyTorch's kernel into a given out, where it has one: "-" where not).

    The copy's GB/s beside the kernel's: the roofline's yardstick is timed in each row's rounds,
    and on a shared host it moved 2.2x between two reports for one working set
    (results/performance.md, section 35), so a row's % reads right only next to it."""
    head = (
        "op",
        "dtype",
        "case",
        "n",
        "grad",
        "tuned us",
        "default us",
        "vendor us",
        "one-shot us",
        "GB/s",
        "copy GB/s",
        "roofline",
        "x vendor",
        "x vendor out",
        "one-shot/kernel",
    )
    lines = [head]
    contiguous = {(r.op, r.dtype, r.numel, r.reduction): r.tuned_s for r in rows if r.case == "contiguous"}
    for r in rows:
        # Round by round over the partner timed beside it where the row has rounds; else over its
        # median (reports before section 25 have no partner: then the contiguous row, timed minutes
        # apart).
        base = r.contiguous_s or contiguous.get((r.op, r.dtype, r.numel, r.reduction))
        if r.case == "contiguous" or base is None:
            case = r.case
        elif len(r.contiguous_x_rounds) > 1:
            case = f"{r.case} ({r.contiguous_x:.2f}x, {spread(r.contiguous_x_rounds, '.2f')})"
        elif r.contiguous_x_rounds:
            case = f"{r.case} ({r.contiguous_x:.2f}x)"
        else:
            case = f"{r.case} ({r.tuned_s / base:.2f}x)"
        roofline = f"{r.roofline_pct:.0f}%"
        if len(r.roofline_pct_rounds) > 1:
            roofline += f" ({spread(r.roofline_pct_rounds, '.0f')})"
        lines.append(
            (
                r.op,
                r.dtype,
                case,
                f"2^{r.numel.bit_length() - 1}",
                "full" if r.reduction == "none" else "0-d",
                f"{r.tuned_s * 1e6:.1f}",
                f"{r.default_s * 1e6:.1f}",
                f"{r.vendor_s * 1e6:.1f}",
                f"{r.oneshot_s * 1e6:.1f}",
                f"{r.gbps:.1f}",
                f"{r.copy_gbps:.1f}",
                roofline,
                f"{r.speedup_vs_vendor:.2f}",
                f"{r.vendor_out_s / r.tuned_s:.2f}" if r.vendor_out_s else "-",
                f"{r.oneshot_s / r.tuned_s:.2f}",
            )
        )
    return "\n".join([*_aligned(lines), *_contention(rows), *_steadiness(rows)])


def _contention(rows: list[BenchRow]) -> list[str]:
    """A line under the report with its rows' CPU wait (the share of a row's run its threads waited
    for a CPU), naming those at timing.BUSY_WAIT and up: timed while other work wanted the host's
    CPUs, a CPU row's ratios time that contention too (a CUDA row's device spans much less so; its
    one-shot column does). Nothing for rows that carry no reading."""
    waits = [(r, r.cpu_wait) for r in rows if r.cpu_wait is not None]
    if not waits:
        return []
    line = f"CPU wait (the share of a row's run its threads waited for a CPU): {spread([w for _, w in waits], '.0%')}"
    busy = [f"{_label(r)} {w:.0%}" for r, w in waits if w >= timing.BUSY_WAIT]
    if not busy:
        return [f"{line}; no row at {timing.BUSY_WAIT:.0%} or more"]
    return [f"{line}; {len(busy)} row(s) at {timing.BUSY_WAIT:.0%} or more, timed beside other work: {', '.join(busy)}"]


STEADINESS_NAMED = 8  # the rows the copy's line names, the worst first


def _steadiness(rows: list[BenchRow]) -> list[str]:
    """A line under the report with how far each row's copy moved across its rounds (fastest over
    slowest, goals.copy_swing), naming those past goals.UNSTEADY_COPY: the host's memory moved while
    they were timed, so their roofline % (and a layout's x over its partner) read the host too. The
    CPU wait misses this: on the Zen 4 of section 99 every row waited 0-2% and one row's roofline
    read 62-102% round by round. Only the rows whose copy runs out of cache (goals.memory_row); none
    of a single round or without the copy's rounds."""
    memory = [r for r in rows if memory_row(r.backend, r.dtype, r.case, r.numel)]
    swings = [(r, s) for r in memory if (s := copy_swing(r.copy_gbps_rounds)) is not None]
    if not swings:
        return []
    span = spread([s for _, s in swings], ".2f")
    line = f"copy GB/s across the rounds of a layout or roofline row (fastest over slowest): {span}x"
    moved = sorted(((s, r) for r, s in swings if s > UNSTEADY_COPY), key=lambda m: -m[0])
    if not moved:
        return [f"{line}; no row over {UNSTEADY_COPY:.2f}x"]
    # The worst by name; `losstune goals` marks every miss among the rest (on the Zen 4 of section
    # 100, 93 of 108 rows moved, a line of 3000 characters named in full).
    named = ", ".join(f"{_label(r)} {s:.2f}x" for s, r in moved[:STEADINESS_NAMED])
    rest = f" and {len(moved) - STEADINESS_NAMED} more" if len(moved) > STEADINESS_NAMED else ""
    over = f"{len(moved)} of {len(swings)} row(s) over {UNSTEADY_COPY:.2f}x"
    return [f"{line}; {over}, timed while the host's memory moved: {named}{rest}"]


def _label(r: BenchRow) -> str:
    """A row as goals names its misses (op dtype case grad size), so both can be searched alike."""
    return f"{r.op} {r.dtype} {r.case} {GRADS.get(r.reduction, '0-d')} {pow2(r.numel)}"
