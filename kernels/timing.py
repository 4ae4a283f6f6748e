"""One timing function for the tuner, asv and the CLI, and the copy-bandwidth probe.

Warm-up, then timed runs until a minimum total time (and a minimum count); each run is bracketed
by a device sync (CUDA events on GPUs), so the time is the device's. Median with p20/p80 and the
raw samples are kept. ``Span`` says what a sample covers: the device's work alone (kernels, the
copy roofline, the vendor baseline) or the whole call with its host side (the one-shot call).
``cold_cache`` writes a buffer larger than the last-level cache between runs; ``sets`` rotates
through independent input sets so no run finds the previous one's data in cache.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import cache

import torch

from kernels import backends

FLUSH_BYTES = 256 << 20  # larger than any last-level cache these hosts have
LEAD_MIN_S = 20e-6  # the shortest spin queued ahead of a launch-free CUDA sample
LEAD_MAX_S = 10e-3  # past this a call's host side is no launch path: time it as it comes
# measure's sampling: untimed calls first, then timed ones until its budget, at least MIN_RUNS and
# at most MAX_RUNS of them; a Grain.LAUNCH round samples each run by the same numbers.
WARMUP = 2
MIN_RUNS = 5
MAX_RUNS = 10_000


class Span(str, Enum):
    """What one sample covers where a device runs asynchronously to the host (CUDA).

    DEVICE: the device's work alone, launch-free. The host's side of the call (Triton's Python
    launcher, torch's dispatch: 20-60 us a call, results/performance.md, section 58) is queued
    behind a spin kernel, so the start event fires only when the call's work is already queued.
    Without it a start event recorded on an idle GPU timed the launch path too: every CUDA row
    below 2^24 read 21-62 us, and a 130 us 16-bit kernel at 2^26 read ~15% slow against a copy
    whose own dispatch is shorter.
    CALL: from the call's start to its device work's end, host side included: the one-shot call.
    On the CPU, and on NPU (torch_npu documents no spin kernel), both are the host's clock
    around a sync.
    """

    DEVICE = "device"
    CALL = "call"


@dataclass(frozen=True)
class Timing:
    median_s: float
    p20_s: float
    p80_s: float
    samples: tuple[float, ...] = field(repr=False)

    @property
    def spread(self) -> float:
        """(p80 - p20) / median: the relative noise of this measurement."""
        return (self.p80_s - self.p20_s) / self.median_s if self.median_s > 0 else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"median_s": self.median_s, "p20_s": self.p20_s, "p80_s": self.p80_s, "n": len(self.samples)}


def _quantile(sorted_values: list[float], q: float) -> float:
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize(samples: list[float]) -> Timing:
    ordered = sorted(samples)
    return Timing(statistics.median(ordered), _quantile(ordered, 0.2), _quantile(ordered, 0.8), tuple(samples))


@cache
def _spin_cycles_per_s(index: int) -> float:
    """``torch.cuda._sleep``'s clock on device ``index``: it spins a given count of SM cycles."""
    with torch.cuda.device(index):
        torch.cuda._sleep(1000)  # the spin kernel's first launch loads it
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        return cycles / (start.elapsed_time(end) / 1e3)


class _Clock:
    """Device-side timing where there is a device; host perf_counter around a sync otherwise.

    ``lead_s`` (CUDA, Span.DEVICE): the spin queued ahead of each sample; ``time`` lengthens it
    (and the sample is taken again) when the call's host side outran it, since then the GPU idled
    inside the timed span."""

    def __init__(self, device: torch.device, span: Span = Span.CALL) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.launch_free = self.cuda and span is Span.DEVICE
        self.lead_s = 0.0

    def lead_for(self, fn: Callable[[], object]) -> None:
        """Sizes the lead from one untimed call's host side (twice it, at least LEAD_MIN_S)."""
        if not self.launch_free:
            return
        self.sync()
        t0 = time.perf_counter()
        fn()
        host = time.perf_counter() - t0
        self.sync()
        self.lead_s = min(LEAD_MAX_S, max(LEAD_MIN_S, 2 * host))

    def _device_time(self, fn: Callable[[], object]) -> float:
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        while True:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if self.launch_free:
                torch.cuda._sleep(int(self.lead_s * _spin_cycles_per_s(index)))
            t0 = time.perf_counter()
            start.record()
            fn()
            end.record()
            host = time.perf_counter() - t0
            end.synchronize()
            if not self.launch_free or host < self.lead_s or self.lead_s >= LEAD_MAX_S:
                return start.elapsed_time(end) / 1e3
            self.lead_s = min(LEAD_MAX_S, 2 * host)  # the host outran the spin: longer, and again

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type == "npu":
            torch.npu.synchronize()  # type: ignore[attr-defined]

    def time(self, fn: Callable[[], object]) -> float:
        if self.cuda:
            return self._device_time(fn)
        self.sync()
        t0 = time.perf_counter()
        fn()
        self.sync()
        return time.perf_counter() - t0


def measure(
    run: Callable[[int], object],
    device: torch.device | str = "cpu",
    *,
    sets: int = 1,
    warmup: int = WARMUP,
    min_time_s: float = 0.1,
    min_runs: int = MIN_RUNS,
    max_runs: int = MAX_RUNS,
    cold_cache: bool = False,
    span: Span = Span.DEVICE,
) -> Timing:
    """Time ``run(i)`` where ``i`` picks the input set (rotating over ``sets``).

    Runs until ``min_time_s`` of timed samples (and ``min_runs`` of them); launch-free CUDA
    samples also stop at four times ``min_time_s`` of the host's wall clock: such a sample of a
    few microseconds costs the host its whole launch path and the lead, so a budget counted in
    device time alone took hundreds of samples where tens tell the median."""
    device = torch.device(device)
    clock = _Clock(device, span)
    flush = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device=device) if cold_cache else None
    for i in range(warmup):
        run(i % sets)
    clock.lead_for(lambda: run(0))
    samples: list[float] = []
    total = 0.0
    i = 0
    wall_end = time.perf_counter() + 4 * min_time_s if clock.launch_free else float("inf")
    while _wants_more(total, min_time_s, wall_end, len(samples), min_runs, max_runs):
        if flush is not None:
            flush.fill_(float(i))
            clock.sync()
        k = i % sets
        dt = clock.time(lambda k=k: run(k))
        samples.append(dt)
        total += dt
        i += 1
    return summarize(samples)


def _wants_more(total: float, budget_s: float, wall_end: float, taken: int, min_runs: int, max_runs: int) -> bool:
    """The sampling's stopping rule (measure's, and a Grain.LAUNCH round's): on while the samples
    hold less than ``budget_s`` and the host's clock is short of ``wall_end``, or while there are
    fewer than ``min_runs`` of them; never past ``max_runs``."""
    return ((total < budget_s and time.perf_counter() < wall_end) or taken < min_runs) and taken < max_runs


@dataclass(frozen=True)
class Rounds:
    """One run's times over interleaved rounds: each round's median, and every sample of them all."""

    medians: tuple[float, ...]
    samples: tuple[float, ...] = field(repr=False)

    @property
    def median_s(self) -> float:
        """The median of the round medians."""
        return statistics.median(self.medians)

    def summary(self) -> Timing:
        """Median, p20 and p80 over every sample."""
        return summarize(list(self.samples))


class Grain(str, Enum):
    """How a round of ``interleaved`` takes its runs' samples.

    RUN: each run's samples together (``measure``, min_time_s of them), one run after another. A
    round of a report's row (six or seven runs) then spans about a third of a second between its
    kernel's samples and its copy's.
    LAUNCH: one launch of each run in turn, over and over, for the same budget: a round's kernel
    and copy samples are milliseconds apart. On a host whose memory moves faster than a round (the
    Zen 4 of results/performance.md, section 100: one row's copy 14.9-42.3 GB/s across seven
    rounds) RUN's round pairs do not cancel the move (the correlation of a round's kernel and copy
    GB/s, 2^24 rows: median 0.24 over 48 report rows), LAUNCH's do (0.54-0.96 in 12 A/B rows). It
    is for working sets out of every cache: each launch finds the other runs' data, not its own, in
    the caches, where RUN's repeats of one run find theirs.
    """

    RUN = "run"
    LAUNCH = "launch"


def interleaved(
    runs: Sequence[Callable[[int], object]],
    device: torch.device | str = "cpu",
    *,
    rounds: int,
    min_time_s: float = 0.1,
    seed: int = 0,
    spans: Sequence[Span] = (),
    grain: Grain = Grain.RUN,
) -> list[Rounds]:
    """``measure`` each of ``runs`` once per round, in an order shuffled anew every round
    (``random.Random(seed)``), so a slow spell of a shared host hits them all alike and their
    ratios, round by round, cancel it. ``spans``: each run's Span (default: Span.DEVICE for all);
    ``grain``: a run's samples together or launch by launch (Grain). One Rounds per run, in the
    order given."""
    if spans and len(spans) != len(runs):
        raise ValueError(f"spans: expected one Span per run ({len(runs)}), got {len(spans)}")
    kinds = tuple(spans) or (Span.DEVICE,) * len(runs)
    medians: list[list[float]] = [[] for _ in runs]
    samples: list[list[float]] = [[] for _ in runs]
    order = list(range(len(runs)))
    rng = random.Random(seed)
    for _ in range(rounds):
        rng.shuffle(order)
        if grain is Grain.LAUNCH:
            results = _by_launch(runs, order, torch.device(device), kinds, min_time_s)
        else:
            results = {i: measure(runs[i], device, min_time_s=min_time_s, span=kinds[i]) for i in order}
        for i, result in results.items():
            medians[i].append(result.median_s)
            samples[i].extend(result.samples)
    return [Rounds(tuple(m), tuple(s)) for m, s in zip(medians, samples, strict=True)]


def _by_launch(
    runs: Sequence[Callable[[int], object]],
    order: Sequence[int],
    device: torch.device,
    kinds: Sequence[Span],
    min_time_s: float,
) -> dict[int, Timing]:
    """One round of Grain.LAUNCH: each run warmed (``measure``'s warm-up, and its clock's lead), then
    one timed launch of each in ``order``, cycle after cycle, until every run has MIN_RUNS
    samples and they hold ``min_time_s`` a run in all (RUN's budget for the round), or a run has
    MAX_RUNS (``measure``'s WARMUP, MIN_RUNS, MAX_RUNS and its _wants_more); launch-free CUDA
    samples also stop at four times that budget of the host's wall clock, as ``measure``'s do."""
    if not order:
        return {}
    clocks = {i: _Clock(device, kinds[i]) for i in order}
    for i in order:
        for _ in range(WARMUP):
            runs[i](0)
        clocks[i].lead_for(lambda i=i: runs[i](0))
    taken: dict[int, list[float]] = {i: [] for i in order}
    budget = min_time_s * len(order)
    launch_free = any(c.launch_free for c in clocks.values())
    wall_end = time.perf_counter() + 4 * budget if launch_free else float("inf")
    total = 0.0
    while _wants_more(total, budget, wall_end, len(taken[order[0]]), MIN_RUNS, MAX_RUNS):
        for i in order:
            dt = clocks[i].time(lambda i=i: runs[i](0))
            taken[i].append(dt)
            total += dt
    return {i: summarize(taken[i]) for i in order}


def _copy(device: str, nbytes: int) -> tuple[Callable[[int], object], int]:
    """``run(i)``: ``dst.copy_(src)`` with ``nbytes`` float32 buffers; and the bytes one run moves,
    read + write counted."""
    n = max(1, nbytes // 4)
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    return (lambda _: dst.copy_(src)), 2 * n * 4


def _matched(nbytes_moved: int) -> int:
    """Copy buffers the size of half an op's traffic (half read, half written), at least 4 KiB."""
    return max(4096, nbytes_moved // 2)


@cache
def copy_bandwidth(device: str = "cpu", nbytes: int = 1 << 28, min_time_s: float = 0.3) -> float:
    """Bytes per second of ``dst.copy_(src)`` with ``nbytes`` buffers, read + write counted."""
    run, moved = _copy(device, nbytes)
    return moved / measure(run, device, min_time_s=min_time_s, warmup=3).median_s


def copy_probe(device: str, nbytes_moved: int) -> tuple[Callable[[int], object], int]:
    """The copy :func:`roofline` times, unmeasured: ``run(i)`` and the bytes one run moves, for a
    caller that times it in the same interleaved rounds as a kernel. On this class of host the
    copy's bandwidth moved 1.6x between reports and within one (results/performance.md, section
    25): one probe per working set, cached for a whole report, let a row be judged against a
    copy timed minutes before it in another regime."""
    return _copy(device, _matched(nbytes_moved))


def roofline(device: str, nbytes_moved: int, min_time_s: float = 0.2) -> float:
    """The copy bandwidth at the same working set as an op that moves ``nbytes_moved``.

    Size-matched because these hosts have caches as large as the tensors (480 MB of L3 on the CI
    class): a 2^22-element op lives in L3, and a copy of 256 MB buffers would flatter it (>100%).
    The copy moves the same bytes (half read, half written) so it sits in the same level.
    """
    return copy_bandwidth(device, _matched(nbytes_moved), min_time_s)


def bytes_moved(tensors_read: list[torch.Tensor], out: torch.Tensor) -> int:
    """What the op must move: each input read once, the output written once."""
    return sum(t.numel() * t.element_size() for t in tensors_read) + out.numel() * out.element_size()


def backend_device(backend: str) -> torch.device:
    return torch.device(backends.info(backend).device_type)


# The share of its runnable time a measurement may wait for a CPU (cpu_wait) and still time the
# kernels rather than the host's other work: alone on a quiet 2-vCPU host a tuner's finalists
# waited 0.000-0.007 (12 decisions at 2^12-2^20, two-thread configs and torch's among them: the
# process's own pools do not crowd it), one minute into a report's run beside it 0.31, pinned to
# one CPU with two spinners 0.67-0.69 (performance.md, section 76). The tuner calls a decision
# over it busy (tuner.study.busy_host); bench --report names the rows over it.
BUSY_WAIT = 0.1

# Each thread of this process: (ns on a CPU, ns runnable but waiting for one), by thread id.
SchedTimes = dict[int, tuple[int, int]]


def sched_times() -> SchedTimes | None:
    """This process's threads' scheduler times, from Linux's ``/proc/self/task/<tid>/schedstat``
    (its first two fields; kept with CONFIG_SCHED_INFO, no sysctl needed); None where there are
    none (another OS, a kernel without it). The worker threads of numba's and torch's pools are
    threads of the process, so a launch on two cores is counted on both."""
    root = "/proc/self/task"
    try:
        tids = os.listdir(root)
    except OSError:
        return None
    times: SchedTimes = {}
    for tid in tids:
        try:
            with open(f"{root}/{tid}/schedstat") as f:
                run, wait = f.read().split()[:2]
        except (OSError, ValueError):  # the thread ended between the listing and the read
            continue
        times[int(tid)] = (int(run), int(wait))
    # A kernel that keeps no such times (before 5.14 without schedstats or delay accounting) prints
    # zeros: no reading, not a process that never ran.
    return times if any(run for run, _ in times.values()) else None


def cpu_wait(before: SchedTimes | None, after: SchedTimes | None) -> float | None:
    """The share of this process's runnable time between two :func:`sched_times` that it spent
    waiting for a CPU: wait / (run + wait), summed over its threads (one that started between them
    counts from zero, one that ended is left out). Near 0 where the host's CPUs are its own; where
    other work wants them too, each thread waits out the others' scheduler slices. A direct reading
    of the contention a measurement ran under, where the 1-minute load average lags a minute behind
    a job that starts or ends (performance.md, section 76: 0.31 one minute into a report's run
    while the load still read 1.28 on 2 CPUs). None where either reading is None or nothing ran."""
    if before is None or after is None:
        return None
    run = wait = 0
    for tid, (r, w) in after.items():
        r0, w0 = before.get(tid, (0, 0))
        if r < r0 or w < w0:  # the id of an ended thread taken by a new one: a new thread
            r0 = w0 = 0
        run += r - r0
        wait += w - w0
    return wait / (run + wait) if run + wait > 0 else None
