"""kernels.timing.interleaved: every run once per round, in a seeded order drawn anew each round."""

from __future__ import annotations

import statistics
import time

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
