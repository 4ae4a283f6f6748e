"""tuner/bench.py: what a report row is measured against, and in which rounds (CPU, small cases)."""

from __future__ import annotations

import dataclasses
import statistics

import pytest
import torch

from kernels import accuracy, dispatch, timing
from kernels.modes import Op, Reduction
from tests.helpers import count_copy_runs
from tuner import bench
from tuner.problems import Case, InputLayout

L1 = Case(Op.L1, torch.float32, (64 * 64,), Reduction.NONE)


def test_copy_probe_moves_the_working_set_it_is_matched_to() -> None:
    run, moved = timing.copy_probe("cpu", 1 << 20)
    assert moved == 1 << 20  # half read, half written, as roofline() sizes it
    run(0)
    small_run, small = timing.copy_probe("cpu", 100)
    assert small == 2 * 4096  # the floor roofline() keeps for tiny cases
    small_run(0)


def test_the_copy_is_timed_in_the_rows_own_rounds_plumbing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plumbing (the copy is real, only counted): the roofline of a row comes from a copy timed in
    that row's interleaved rounds, never from the per-process cached probe, which a 20-minute
    report would otherwise read for rows timed long after it."""
    calls = count_copy_runs(monkeypatch)
    row = bench.bench_case(L1, "cpu", min_time_s=0.001, rounds=3)
    assert calls["copy"] >= 3 * 5  # every round, each at least measure()'s min_runs
    nbytes = 3 * L1.numel * 4 + L1.numel * 4  # l1 reads g, x, t and writes out
    assert row.copy_gbps > 0 and len(row.roofline_pct_rounds) == 3 and min(row.roofline_pct_rounds) > 0
    assert row.roofline_pct == pytest.approx(statistics.median(row.roofline_pct_rounds))
    assert row.gbps == pytest.approx(nbytes / row.tuned_s / 1e9)
    assert row.contiguous_s == 0.0 and row.contiguous_x_rounds == ()  # a contiguous row has no partner


def _fake_rounds(monkeypatch: pytest.MonkeyPatch, fake: dict[int, tuple[float, ...]]) -> list[tuple[timing.Span, ...]]:
    """Plumbing: timing.interleaved launches every run once, for real, and hands back made-up round
    medians (``fake``, by run index; 1.0 s for the rest). The list it returns gets each call's spans."""
    seen: list[tuple[timing.Span, ...]] = []

    def interleaved(runs, device="cpu", *, rounds, min_time_s=0.1, seed=0, spans=(), grain=timing.Grain.RUN):  # noqa: ANN001, ANN202
        seen.append(tuple(spans))
        for run in runs:
            run(0)
        return [timing.Rounds(fake.get(i, (1.0, 1.0, 1.0)), fake.get(i, (1.0,))) for i in range(len(runs))]

    monkeypatch.setattr(timing, "interleaved", interleaved)
    return seen


def test_ratios_pair_each_round_plumbing_with_fake_times(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plumbing (the launches are real, the times handed back are made up): the roofline % and a
    layout's x over its partner are taken round by round, then their median. The host's slow
    spells hit the rounds unevenly; the ratios of the medians, each taken from another round, would
    say the transposed walk runs at half its partner's time, and at 150% of the roofline."""
    fake = {0: (2.0, 2.0, 6.0), 4: (1.0, 3.0, 4.0), 5: (1.0, 4.0, 4.0)}  # tuned, copy, partner (s)
    seen = _fake_rounds(monkeypatch, fake)
    transposed = Case(Op.L1, torch.float32, (64 * 64,), Reduction.NONE, layout=InputLayout.TRANSPOSED)
    row = bench.bench_case(transposed, "cpu", min_time_s=0.001, rounds=3, partner=L1)
    assert row.contiguous_x_rounds == (2.0, 0.5, 1.5) and row.contiguous_x == 1.5
    assert row.tuned_s / row.contiguous_s == 0.5  # what the medians alone would have said
    # every run launch-free but the one-shot call (its host side is what it measures)
    device, call = timing.Span.DEVICE, timing.Span.CALL
    assert seen == [(device, device, device, call, device, device)]
    _, copy_bytes = timing.copy_probe("cpu", 4 * L1.numel * 4)
    assert copy_bytes == 4 * L1.numel * 4  # the copy moves the op's bytes: % = 100 x copy time / kernel time
    assert row.roofline_pct_rounds == pytest.approx((50.0, 150.0, 400 / 6))
    assert row.roofline_pct == pytest.approx(400 / 6) and 100 * row.gbps / row.copy_gbps == pytest.approx(150.0)
    text = bench.format_report([row])
    assert "transposed (1.50x, 0.50-2.00)" in text and f"{row.roofline_pct:.0f}% (" in text


def test_a_rows_speedups_are_the_default_and_vendor_times_over_the_tuned_plumbing_with_fake_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plumbing (real launches, made-up round medians): "x default" and "x vendor" are how many
    times faster the tuned kernel is, each the other's median over the tuned one's."""
    _fake_rounds(monkeypatch, {0: (2.0, 2.0, 2.0), 1: (4.0, 4.0, 4.0), 2: (6.0, 6.0, 6.0)})
    row = bench.bench_case(L1, "cpu", min_time_s=0.001, rounds=3)
    assert (row.tuned_s, row.default_s, row.vendor_s) == (2.0, 4.0, 6.0)
    assert (row.speedup_vs_default, row.speedup_vs_vendor) == (2.0, 3.0)


def test_an_mse_row_times_pytorchs_kernel_into_an_out_in_its_rounds_plumbing_with_fake_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plumbing (the launches are real, the times made up): mse's row times PyTorch's own kernel
    into a spare out as one more run of its rounds, launch-free, and the report prints the kernel's
    speedup over it; an L1 row has no such run and prints "-"."""
    fake = {0: (2.0, 2.0, 2.0), 2: (8.0, 8.0, 8.0), 5: (3.0, 3.0, 3.0)}  # tuned, vendor, vendor into out (s)
    seen = _fake_rounds(monkeypatch, fake)
    mse = Case(Op.MSE, torch.float32, (64 * 64,), Reduction.MEAN)
    row, l1 = bench.bench_case(mse, "cpu", rounds=3), bench.bench_case(L1, "cpu", rounds=3)
    device, call = timing.Span.DEVICE, timing.Span.CALL
    assert seen == [(device, device, device, call, device, device), (device, device, device, call, device)]
    assert (row.vendor_s, row.vendor_out_s, l1.vendor_out_s) == (8.0, 3.0, 0.0)
    head, mse_line, l1_line = bench.format_report([row, l1]).splitlines()[:3]
    at = head.index("x vendor out")  # aligned columns: a cell starts where its header does
    assert head[:at].split()[-2:] == ["x", "vendor"] and head[at:].split()[3] == "one-shot/kernel"
    assert mse_line[at:].split()[:2] == ["1.50", f"{row.oneshot_s / row.tuned_s:.2f}"]
    assert l1_line[at:].split()[0] == "-"


def test_a_layout_rows_vendor_out_run_comes_after_its_partner_plumbing_with_fake_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plumbing (launches real, times made up): with a partner timed beside it, the mse row's
    vendor-into-out run is the last of seven and its median is read from there, not the partner's."""
    fake = {5: (4.0, 4.0, 4.0), 6: (3.0, 3.0, 3.0)}  # partner, vendor into out (s)
    seen = _fake_rounds(monkeypatch, fake)
    mse = Case(Op.MSE, torch.float32, (64 * 64,), Reduction.NONE)
    row = bench.bench_case(dataclasses.replace(mse, layout=InputLayout.TRANSPOSED), "cpu", rounds=3, partner=mse)
    assert len(seen[0]) == 7 and (row.contiguous_s, row.vendor_out_s) == (4.0, 3.0)


@pytest.mark.parametrize("wrong", ["raises", "other values"])
def test_a_vendor_into_out_that_fails_its_check_leaves_the_column_out_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, wrong: str
) -> None:
    """Checked once before any timing: a kernel into out that raises, or writes other values than
    the allocating call returns, costs the row its column (a warning says so), not the report."""

    def bad(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        if wrong == "raises":
            raise NotImplementedError("no out= overload on this backend")
        return out.fill_(1.0)

    monkeypatch.setattr(Case, "baseline_into", lambda self: bad)
    mse = Case(Op.MSE, torch.float32, (64 * 64,), Reduction.NONE)
    with pytest.warns(UserWarning, match="PyTorch's kernel into a given out"):
        row = bench.bench_case(mse, "cpu", min_time_s=0.001, rounds=1)
    assert row.vendor_out_s == 0.0 and row.vendor_s > 0


def test_a_report_row_records_its_cpu_wait_and_the_report_names_the_rows_timed_beside_other_work() -> None:
    row = bench.bench_case(L1, "cpu", min_time_s=0.001, rounds=1)
    if timing.sched_times() is not None:  # Linux: read over the row's own rounds
        assert row.cpu_wait is not None and 0.0 <= row.cpu_wait < 1.0
    quiet, busy = (dataclasses.replace(row, cpu_wait=w) for w in (0.01, timing.BUSY_WAIT + 0.2))
    assert bench.format_report([quiet, busy]).splitlines()[-1] == (
        "CPU wait (the share of a row's run its threads waited for a CPU): 1%-30%; 1 row(s) at 10% or more,"
        " timed beside other work: l1 float32 contiguous full 2^12 30%"
    )
    assert bench.format_report([quiet]).splitlines()[-1].endswith(": 1%-1%; no row at 10% or more")
    unread = dataclasses.replace(row, cpu_wait=None)  # another OS: no line at all
    assert len(bench.format_report([unread]).splitlines()) == 2


def test_rows_a_goal_reads_take_the_goal_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The layout rows and the contiguous rows from goal_numel on take goal_rounds; the rest, rounds."""
    monkeypatch.setattr(bench, "REPORT_LAYOUT_SIZE", "2^12")
    small = Case(Op.L1, torch.float32, (2**10,), Reduction.NONE)
    rows = bench.report_rows([small, L1], "cpu", min_time_s=0.001, rounds=1, goal_rounds=3, goal_numel=2**12)
    assert [(r.numel, r.case) for r in rows] == [(2**10, "contiguous"), (2**12, "contiguous")] + [
        (2**12, "broadcast"),
        (2**12, "transposed"),
    ]
    assert [len(r.roofline_pct_rounds) for r in rows] == [1, 3, 3, 3]
    assert [len(r.contiguous_x_rounds) for r in rows] == [0, 0, 3, 3]
    # The contiguous rows the roofline goal reads, launch by launch on the CPU (their working sets
    # out of cache at the real goal_numel); the rest, and every row of a GPU, run by run.
    assert [r.grain for r in rows] == ["run", "launch", "run", "run"]
    assert bench.roofline_grain("cuda") is timing.Grain.RUN
    # the tuner's finalists take the same rule (study._finalists): by size, from goals.LARGE_NUMEL
    launch, run = timing.Grain.LAUNCH, timing.Grain.RUN
    assert [bench.grain_for("cpu", n) for n in (2**22, 2**24, 2**26)] == [run, launch, launch]
    assert bench.grain_for("cuda", 2**26) is run and bench.grain_for("cpu", 2**12, goal_numel=2**12) is launch


def test_layout_rows_are_timed_at_each_size_asked_in_its_order() -> None:
    """layout_numels (bench --report --layout-size): the layout rows of every size asked, size by
    size as given, each beside its own size's partner; a size the cases lack has no row."""
    small = Case(Op.L1, torch.float32, (2**10,), Reduction.NONE)
    rows = bench.report_rows(
        [small, L1],
        "cpu",
        min_time_s=0.001,
        rounds=1,
        layouts=(InputLayout.TRANSPOSED,),
        layout_numels=(2**12, 2**10, 2**14),
    )
    assert [(r.numel, r.case) for r in rows] == [(2**12, "transposed"), (2**10, "transposed")]
    assert all(r.contiguous_s > 0 and len(r.contiguous_x_rounds) == 1 for r in rows)


def test_layout_rows_are_judged_against_a_partner_timed_beside_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "REPORT_LAYOUT_SIZE", "2^12")  # L1's size: small enough for a unit test
    transposed = Case(Op.L1, torch.float32, (64 * 64,), Reduction.NONE, layout=InputLayout.TRANSPOSED)
    rows = bench.report_rows([L1], "cpu", min_time_s=0.001, rounds=1)
    assert [r.case for r in rows] == ["contiguous", "broadcast", "transposed"]
    assert rows[0].contiguous_s == 0.0 and all(r.contiguous_s > 0 for r in rows[1:])
    # The printed ratio is over the partner of the row's own rounds, not over the contiguous row.
    text = bench.format_report(rows).splitlines()
    line = next(ln for ln in text if "transposed (" in ln)
    assert rows[2].contiguous_x == pytest.approx(rows[2].tuned_s / rows[2].contiguous_s)  # one round: the same
    assert f"({rows[2].contiguous_x:.2f}x)" in line
    # The copy's GB/s stands beside the kernel's, in the column the header names.
    at = text[0].index("copy GB/s")  # columns are aligned: a cell starts where its header does
    assert text[0][:at].split()[-1] == "GB/s" and text[0][at:].split()[2] == "roofline"
    assert text[1][at:].split()[:2] == [f"{rows[0].copy_gbps:.1f}", f"{rows[0].roofline_pct:.0f}%"]
    assert bench.bench_case(transposed, "cpu", min_time_s=0.001, rounds=1, partner=L1).contiguous_s > 0


def test_kls_report_adds_a_summed_row_timed_beside_its_partner(monkeypatch: pytest.MonkeyPatch) -> None:
    """KL's input one row against target's 64 (the gradient summed back over them): a layout row of
    KL's alone, checked against the reference before it is timed, and measured by the bytes KL
    must move there: the 0-d gradient and the target read, one row written."""
    monkeypatch.setattr(bench, "REPORT_LAYOUT_SIZE", "2^12")
    kl = Case(Op.KL_DIV, torch.float32, (64 * 64,), Reduction.MEAN)
    rows = bench.report_rows([kl, L1], "cpu", min_time_s=0.001, rounds=1)
    assert [(r.op, r.case) for r in rows] == [
        ("kl_div", "contiguous"),
        ("l1", "contiguous"),
        ("kl_div", "broadcast"),
        ("kl_div", "transposed"),
        ("kl_div", "summed"),
        ("l1", "broadcast"),
        ("l1", "transposed"),
    ]
    summed = rows[4]
    assert summed.shape == "4096" and summed.contiguous_s > 0 and summed.contiguous_x > 0
    assert summed.gbps == pytest.approx((4 + 64 * 64 * 4 + 64 * 4) / summed.tuned_s / 1e9)
    assert "summed (" in bench.format_report(rows)


def test_a_summed_case_hands_input_as_one_row_and_is_kls_alone() -> None:
    case = Case(Op.KL_DIV, torch.float16, (64 * 8,), Reduction.NONE, layout=InputLayout.SUMMED)
    g, x, t = case.inputs("cpu")
    assert (g.shape, x.shape, t.shape, case.out_like(x).shape) == ((64, 8), (1, 8), (64, 8), (1, 8))
    plain_g, plain_x, plain_t = Case(Op.KL_DIV, torch.float16, (64 * 8,), Reduction.NONE).inputs("cpu")
    assert torch.equal(x, plain_x[:8].reshape(1, 8)) and torch.equal(t.reshape(-1), plain_t)  # views, same values
    with pytest.raises(ValueError, match="layout: summed is KL's alone .* got op mse"):
        Case(Op.MSE, torch.float32, (64 * 8,), Reduction.NONE, layout=InputLayout.SUMMED)


def test_a_summed_row_is_held_to_the_sums_bar_not_the_elementwise_one() -> None:
    """A full gradient's 64 terms per output cancel to results far smaller than the terms: their
    float32 sum is correct within SEMANTICS' 1e-5 of the summed magnitudes but many ulps of the
    result. The report must accept it, and still refuse a wrong sum."""
    case = Case(Op.KL_DIV, torch.float32, (64 * 1024,), Reduction.NONE, layout=InputLayout.SUMMED)
    g, x, t = case.inputs("cpu")
    out = case.out_like(x)
    dispatch.run(case.phase_one(g, x, t, out, "cpu"))
    ref = case.reference(g, x, t)
    assert accuracy.mismatch(out, ref) is not None  # the elementwise bar: some cancelled sums fail it
    assert case.mismatch(out, ref, g, x, t) is None
    off = out.clone()
    off[0, 7] += 1e-3 * (t[:, 7].abs() * g[:, 7].abs()).sum()  # 1e-3 of the summed magnitudes
    assert "1 of 1024 elements off" in str(case.mismatch(off, ref, g, x, t))


def test_a_report_row_records_its_copys_rounds_and_the_report_names_the_rows_whose_copy_moved() -> None:
    """Each round's copy GB/s (copy_gbps is their median's); under the report, how far the copy moved
    across the rounds of the rows whose copy runs out of cache, naming those over UNSTEADY_COPY. Here
    the moves are written into the rows by hand: this host's real ones are what the line reports."""
    row = bench.bench_case(L1, "cpu", min_time_s=0.001, rounds=3)
    assert len(row.copy_gbps_rounds) == 3 and min(row.copy_gbps_rounds) > 0
    assert row.copy_gbps == pytest.approx(statistics.median(row.copy_gbps_rounds))
    large = dataclasses.replace(row, numel=2**24, cpu_wait=None)
    steady = dataclasses.replace(large, copy_gbps_rounds=(30.0, 33.0, 31.0))
    moved = dataclasses.replace(large, reduction="mean", copy_gbps_rounds=(36.0, 24.0, 30.0))
    layout = dataclasses.replace(row, numel=2**22, case="transposed", cpu_wait=None, copy_gbps_rounds=(20.0, 25.0))
    cached = dataclasses.replace(row, cpu_wait=None, copy_gbps_rounds=(10.0, 30.0))  # 2^12: in cache, not named
    assert bench.format_report([steady, layout, moved, cached]).splitlines()[-1] == (
        "copy GB/s across the rounds of a layout or roofline row (fastest over slowest): 1.10-1.50x; 2 of 3 row(s)"
        " over 1.20x, timed while the host's memory moved: l1 float32 contiguous 0-d 2^24 1.50x,"
        " l1 float32 transposed full 2^22 1.25x"
    )
    many = [dataclasses.replace(moved, numel=2**k) for k in range(24, 24 + bench.STEADINESS_NAMED + 2)]
    assert bench.format_report(many).splitlines()[-1].endswith("contiguous 0-d 2^31 1.50x and 2 more")
    assert bench.format_report([steady]).splitlines()[-1].endswith(": 1.10-1.10x; no row over 1.20x")
    single = dataclasses.replace(large, copy_gbps_rounds=(30.0,))  # one round, or an older report: no line
    assert len(bench.format_report([single, cached]).splitlines()) == 3
