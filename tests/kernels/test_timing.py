"""kernels.timing.interleaved: every run once per round, in a seeded order drawn anew each round."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from kernels import timing


def test_interleaved_times_each_run_once_a_round_in_a_seeded_shuffled_order() -> None:
    calls: list[int] = []

    def run(k: int) -> object:
        return lambda _: calls.append(k)

    runs = [run(k) for k in range(4)]
    timed = timing.interleaved(runs, rounds=6, min_time_s=0.0, seed=3)
    assert [len(t.medians) for t in timed] == [6] * 4
    per_call = 2 + 5  # measure's warm-up and its minimum count of timed runs
    assert [len(t.samples) for t in timed] == [6 * 5] * 4
    order = calls[::per_call]  # which run each measure call was
    rounds = [order[i : i + 4] for i in range(0, len(order), 4)]
    assert all(sorted(r) == [0, 1, 2, 3] for r in rounds)  # each run once in every round
    assert len({tuple(r) for r in rounds}) > 1  # the order is drawn anew, not fixed
    calls.clear()
    timing.interleaved(runs, rounds=6, min_time_s=0.0, seed=3)
    assert calls[::per_call] == order  # and the same for the same seed


def test_launch_grain_takes_one_launch_of_each_run_in_turn_in_the_rounds_order() -> None:
    """Grain.LAUNCH: each run warmed, then one timed launch of every run in the round's order, cycle
    after cycle, so a round's samples of each run are a launch apart; every run gets as many samples
    (measure's minimum here), and the rounds' orders are RUN's, seed for seed."""
    calls: list[int] = []
    runs = [lambda _, k=k: calls.append(k) for k in range(3)]
    timed = timing.interleaved(runs, rounds=4, min_time_s=0.0, seed=3, grain=timing.Grain.LAUNCH)
    assert [len(t.medians) for t in timed] == [4] * 3 and [len(t.samples) for t in timed] == [4 * 5] * 3
    per_round = 3 * 2 + 3 * 5  # the warm-ups, then five cycles
    rounds = [calls[i : i + per_round] for i in range(0, len(calls), per_round)]
    assert len(rounds) == 4
    for r in rounds:
        warm, cycles = r[:6], r[6:]
        order = warm[::2]
        assert sorted(order) == [0, 1, 2] and warm == [k for k in order for _ in range(2)]
        assert cycles == order * 5  # one launch of each, in the round's order, five times
    calls.clear()
    timing.interleaved(runs, rounds=4, min_time_s=0.0, seed=3)  # RUN: its orders, run after run
    assert [calls[::7][i : i + 3] for i in range(0, 12, 3)] == [r[:6:2] for r in rounds]


def test_launch_grain_spends_runs_budget_a_round_and_times_each_launch() -> None:
    """A round of Grain.LAUNCH holds min_time_s a run in all, as RUN's does, and each sample is one
    launch's time: a 2 ms run beside a 0 ms one gets as many samples as it, each about 2 ms."""
    slow, fast = (lambda _: time.sleep(2e-3)), (lambda _: None)
    timed = timing.interleaved([slow, fast], rounds=1, min_time_s=0.02, grain=timing.Grain.LAUNCH)
    assert len(timed[0].samples) == len(timed[1].samples) >= 5
    total, last_cycle = sum(timed[0].samples) + sum(timed[1].samples), timed[0].samples[-1] + timed[1].samples[-1]
    assert total - last_cycle < 2 * 0.02 <= total  # it stops at the first cycle past the budget
    assert min(timed[0].samples) >= 2e-3 and timed[1].median_s < 1e-3
    assert timing.interleaved([], rounds=2, grain=timing.Grain.LAUNCH) == []


def test_rounds_report_the_median_of_round_medians_and_every_sample() -> None:
    (timed,) = timing.interleaved([lambda _: sum(range(1000))], rounds=3, min_time_s=0.0)
    assert timed.median_s == statistics.median(timed.medians)
    summary = timed.summary()
    assert summary.samples == timed.samples and len(timed.samples) == 3 * 5
    assert summary.p20_s <= summary.median_s <= summary.p80_s
    assert summary.median_s == pytest.approx(statistics.median(timed.samples))


def test_interleaved_rejects_spans_that_do_not_match_the_runs() -> None:
    with pytest.raises(ValueError, match=r"spans: expected one Span per run \(2\), got 1"):
        timing.interleaved([lambda _: None, lambda _: None], rounds=1, spans=[timing.Span.CALL])


def test_on_the_cpu_both_spans_are_the_hosts_clock_around_the_call() -> None:
    for span in timing.Span:
        timed = timing.measure(lambda _: time.sleep(1e-3), min_time_s=0.0, span=span)
        assert timed.median_s >= 1e-3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_launch_free_cuda_sample_leaves_the_calls_host_side_out() -> None:
    # The call spends 2 ms on the host before a microseconds-long kernel: a CALL sample holds the
    # 2 ms, a DEVICE sample (the call queued behind the spin kernel) only the kernel.
    x = torch.ones(1 << 12, device="cuda")

    def call(_: int) -> None:
        time.sleep(2e-3)
        x.add_(1.0)

    host = timing.measure(call, "cuda", min_time_s=0.0, span=timing.Span.CALL)
    device = timing.measure(call, "cuda", min_time_s=0.0, span=timing.Span.DEVICE)
    assert host.median_s >= 2e-3
    assert device.median_s < 0.5e-3


def test_cpu_wait_sums_each_threads_deltas_counting_a_new_thread_from_zero_and_leaving_an_ended_one_out() -> None:
    before = {1: (100, 10), 2: (50, 0), 3: (999, 999)}  # thread 3 ends before the second reading
    after = {1: (160, 30), 2: (90, 0), 4: (20, 20)}  # thread 4 starts after the first
    assert timing.cpu_wait(before, after) == pytest.approx((20 + 0 + 20) / (60 + 20 + 40 + 0 + 20 + 20))
    assert timing.cpu_wait(None, after) is None and timing.cpu_wait(before, None) is None
    assert timing.cpu_wait(after, after) is None  # nothing ran between them
    # an ended thread's id taken by a new one (its counts start again): counted as the new thread
    assert timing.cpu_wait({5: (1000, 500)}, {5: (30, 10)}) == pytest.approx(10 / 40)


# A process pinned to one CPU that spins for 0.5 s beside a spinner pinned to the same CPU, and prints
# the share of that time it waited (its CPU wait).
_SHARED_CPU = """
import os, time
from kernels import timing
from tests.helpers import spinning_on
cpu = min(os.sched_getaffinity(0))
os.sched_setaffinity(0, {cpu})
with spinning_on(cpu, 1):
    before = timing.sched_times()
    start = time.perf_counter()
    while time.perf_counter() - start < 0.5:
        pass
    after = timing.sched_times()
print(timing.cpu_wait(before, after))
"""


@pytest.mark.skipif(timing.sched_times() is None, reason="the OS gives no per-thread scheduler times")
def test_cpu_wait_reads_the_time_a_process_waited_for_the_cpu_it_shares_with_a_spinner() -> None:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _SHARED_CPU], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    wait = float(done.stdout.split()[-1])
    # Two runnable threads on one CPU take turns: each waits about half the time (0.5 measured).
    assert 0.25 <= wait < 1.0


@pytest.mark.skipif(timing.sched_times() is None, reason="the OS gives no per-thread scheduler times")
def test_sched_times_reads_every_thread_of_the_process_with_its_time_on_a_cpu() -> None:
    before = timing.sched_times()
    assert before is not None and os.getpid() in before  # the main thread's id is the process id
    start = time.perf_counter()
    while time.perf_counter() - start < 0.05:
        pass
    after = timing.sched_times()
    assert after is not None and after[os.getpid()][0] > before[os.getpid()][0]
