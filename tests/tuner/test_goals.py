"""tuner.goals: the goals table and its misses, from report rows shaped as report.json's.

The rows are written out by hand, each with the one number a goal reads, so every threshold is
tested from both sides: a row just inside, a row just outside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tuner.cli import main
from tuner.goals import _evaluate, across, check_rows, evaluate, format_across, format_goals, recorded_wait


def _row(dtype: str = "float32", numel: int = 2**24, reduction: str = "none", case: str = "contiguous", **kw: object):
    row = {
        "op": "mse",
        "dtype": dtype,
        "numel": numel,
        "reduction": reduction,
        "case": case,
        "tuned_s": 1.0,
        "oneshot_s": 1.0,
        "contiguous_s": 0.0,
        "roofline_pct": 100.0,
        "speedup_vs_vendor": 2.0,
    }
    return row | kw


def _met() -> list[dict[str, object]]:
    """Every goal met, each by a little: 90% float32, 80% bfloat16, layouts 1.5x, one-shot 2x."""
    return [
        _row(numel=2**16, oneshot_s=2.0),
        _row(numel=2**16, reduction="mean", oneshot_s=1.5),
        _row(roofline_pct=90.0),
        _row(reduction="mean", roofline_pct=120.0),
        _row(numel=2**22, case="transposed", tuned_s=1.5, contiguous_s=1.0),
        _row(numel=2**22, case="broadcast", tuned_s=0.7, contiguous_s=1.0, speedup_vs_vendor=1.0),
        _row(numel=2**22, case="broadcast", reduction="mean", tuned_s=1.2, contiguous_s=1.0),
        _row("bfloat16", 2**26, roofline_pct=80.0),
    ]


def test_a_report_that_meets_every_goal_has_no_misses_and_its_table_reads_the_rows() -> None:
    table, misses = evaluate(_met())
    assert misses == []
    mse32, mse16 = table
    assert (mse32.op, mse32.dtype, mse16.dtype) == ("mse", "float32", "bfloat16")
    assert mse32.roofline == {("full", 2**24): 90.0, ("0-d", 2**24): 120.0}
    assert mse32.layout == {("transposed", "full"): 1.5, ("broadcast", "full"): 0.7, ("broadcast", "0-d"): 1.2}
    assert mse32.oneshot == (1.5, 2.0) and mse32.vendor == (1.0, 2.0)
    text = format_goals(table, misses)
    assert "| mse | float32 | 90/- | 120/- | 1.50 | 0.70-1.20 | - | 1.50-2.00 | 1.00-2.00 |" in text
    assert "| mse | bfloat16 | -/80 | -/- |" in text and "0 goal(s) not met" in text


@pytest.mark.parametrize(
    ("row", "what", "measured"),
    [
        (_row(roofline_pct=89.9), "roofline full 2^24", 89.9),
        (_row("float16", 2**26, "mean", roofline_pct=79.0), "roofline 0-d 2^26", 79.0),
        (
            _row(numel=2**22, case="transposed", reduction="sum", tuned_s=1.6, contiguous_s=1.0),
            "transposed 0-d 2^22",
            1.6,
        ),
        (_row(numel=2**22, case="broadcast", tuned_s=3.1, contiguous_s=2.0), "broadcast full 2^22", 1.55),
        (_row(numel=2**16, oneshot_s=2.1), "one-shot / kernel full 2^16", 2.1),
        (_row(numel=2**10, speedup_vs_vendor=0.95), "x vendor contiguous full 2^10", 0.95),
    ],
)
def test_each_goal_names_the_row_that_misses_it(row: dict[str, object], what: str, measured: float) -> None:
    (miss,) = evaluate([*_met(), row])[1]
    assert (miss.op, miss.dtype, miss.what, miss.measured) == ("mse", row["dtype"], what, pytest.approx(measured))
    assert miss.line().startswith(f"mse {row['dtype']} {what}: ") and "(goal " in miss.line()


def test_kls_summed_rows_have_their_column_and_are_held_to_the_layout_line() -> None:
    """KL's summed rows (input one row against target's 64, summed back): their own column, full /
    0-d, and the 1.5x line of the other layouts."""
    kl = [
        _row(op="kl_div", numel=2**22, case="summed", tuned_s=1.5, contiguous_s=1.0),
        _row(op="kl_div", numel=2**22, case="summed", reduction="mean", tuned_s=1.6, contiguous_s=1.0),
    ]
    table, misses = evaluate([*_met(), *kl])
    assert [m.line() for m in misses] == ["kl_div float32 summed 0-d 2^22: 1.60x (goal <= 1.5x)"]
    text = format_goals(table, misses)
    assert "| kl_div | float32 | -/- | -/- | - | - | 1.50 / 1.60 | - | 2.00-2.00 |" in text
    assert "| mse | float32 | 90/- | 120/- | 1.50 | 0.70-1.20 | - |" in text


def test_layout_rows_at_several_sizes_are_each_checked_and_the_table_shows_the_worst() -> None:
    """bench --report --layout-size 2^20 --layout-size 2^22: a layout row of each size is a goal of
    its own, named by its size, and the table's cell, which has room for one ratio, is the worst."""
    rows = [
        _row(numel=2**20, case="transposed", tuned_s=2.5, contiguous_s=1.0),
        _row(numel=2**22, case="transposed", tuned_s=1.2, contiguous_s=1.0),
        _row(numel=2**20, case="transposed", reduction="mean", tuned_s=1.4, contiguous_s=1.0),
        _row(numel=2**22, case="transposed", reduction="mean", tuned_s=1.6, contiguous_s=1.0),
    ]
    table, misses = evaluate(rows)
    assert [m.line() for m in misses] == [
        "mse float32 transposed full 2^20: 2.50x (goal <= 1.5x)",
        "mse float32 transposed 0-d 2^22: 1.60x (goal <= 1.5x)",
    ]
    assert table[0].layout == {("transposed", "full"): 2.5, ("transposed", "0-d"): 1.6}
    assert table[0].layout_numels == (2**20, 2**22)
    text = format_goals(table, misses)
    assert "| transposed full / 0-d (worst of 2^20, 2^22) | broadcast (worst of 2^20, 2^22) |" in text
    assert "| mse | float32 | - | - | 2.50 / 1.60 | - |" in text  # no roofline row: "-", not an empty cell
    assert "(worst of" not in format_goals(*evaluate(_met()))  # one size: the header as before


def test_a_roofline_miss_gives_the_kernels_and_the_copys_bandwidth_where_the_report_has_them() -> None:
    """The same 44% is a slower kernel or a faster copy: the line says which (report.json rows carry
    gbps and copy_gbps from their own rounds; older reports have neither, and their line none)."""
    fast_copy = _row("float16", reduction="mean", roofline_pct=43.7, gbps=37.44, copy_gbps=85.66)
    (miss,) = evaluate([*_met(), fast_copy])[1]
    assert miss.detail == "kernel 37.4 GB/s, copy 85.7 GB/s"
    assert miss.line() == "mse float16 roofline 0-d 2^24: 44% (goal >= 80%; kernel 37.4 GB/s, copy 85.7 GB/s)"
    (bare,) = evaluate([*_met(), _row("float16", reduction="mean", roofline_pct=43.7)])[1]
    assert bare.detail == "" and bare.line() == "mse float16 roofline 0-d 2^24: 44% (goal >= 80%)"
    # Only roofline misses carry it: a transposed row's ratio is over its partner, not a copy.
    layout = _row(numel=2**22, case="transposed", tuned_s=1.6, contiguous_s=1.0, gbps=1.0, copy_gbps=2.0)
    (ratio,) = evaluate([*_met(), layout])[1]
    assert ratio.detail == ""


def test_a_layout_row_with_rounds_is_judged_round_by_round_and_its_miss_gives_their_spread() -> None:
    """Reports since section 45 carry each round's ratio: the goal reads their median, not the ratio
    of two medians taken from different rounds, and a miss names the rounds' range."""
    paired = {"contiguous_x_rounds": [1.40, 1.45, 1.90], "contiguous_x": 1.45}
    inside = _row(numel=2**22, case="transposed", tuned_s=1.7, contiguous_s=1.0, **paired)
    assert evaluate([*_met(), inside])[1] == []  # 1.7x by the medians alone
    over = {"contiguous_x_rounds": [1.52, 1.60, 1.70], "contiguous_x": 1.60}
    (miss,) = evaluate([*_met(), _row(numel=2**22, case="transposed", tuned_s=1.4, contiguous_s=1.0, **over)])[1]
    assert miss.line() == "mse float32 transposed full 2^22: 1.60x (goal <= 1.5x; rounds 1.52-1.70)"
    rounds = {"roofline_pct_rounds": [70.0, 75.0, 91.0], "gbps": 30.0, "copy_gbps": 40.0}
    (low,) = evaluate([*_met(), _row(roofline_pct=75.0, **rounds)])[1]
    assert low.detail == "kernel 30.0 GB/s, copy 40.0 GB/s; rounds 70-91"


def test_a_miss_just_under_its_line_is_printed_with_the_digits_that_show_it() -> None:
    """79.94% misses ">= 80%"; rounded to a whole % it printed "80%", which reads as met."""
    (low,) = evaluate([*_met(), _row("bfloat16", reduction="mean", roofline_pct=79.94)])[1]
    assert low.line() == "mse bfloat16 roofline 0-d 2^24: 79.9% (goal >= 80%)"
    (hair,) = evaluate([*_met(), _row("bfloat16", reduction="mean", roofline_pct=79.996)])[1]
    assert hair.line().startswith("mse bfloat16 roofline 0-d 2^24: 79.996% (")
    (over,) = evaluate([*_met(), _row(numel=2**22, case="transposed", tuned_s=1.5012, contiguous_s=1.0)])[1]
    assert over.line() == "mse float32 transposed full 2^22: 1.501x (goal <= 1.5x)"
    (far,) = evaluate([*_met(), _row(roofline_pct=88.4)])[1]  # away from the line: as the table prints it
    assert far.line() == "mse float32 roofline full 2^24: 88% (goal >= 90%)"
    verdicts, _ = across([[*_met(), _row("bfloat16", reduction="mean", roofline_pct=79.94)], _met()])
    assert [v.line() for v in verdicts] == ["mse bfloat16 roofline 0-d 2^24: 79.9%, - (goal >= 80%)"]


def test_a_below_roofline_row_under_the_large_size_is_no_miss() -> None:
    """The roofline goal is for 2^24 elements and up; smaller rows sit in the cache."""
    assert evaluate([*_met(), _row(numel=2**22, roofline_pct=20.0)])[1] == []


def test_a_cuda_report_holds_every_dtype_to_90_percent_from_2p26_on() -> None:
    """The GPU's goal: the device-to-device copy as the roofline, 90% from 2^26 elements on, for
    16-bit too; its 2^24 rows are no roofline goal (a few microseconds, a launch's latency)."""
    rows = [
        _row("float16", 2**24, backend="cuda", roofline_pct=50.0),
        _row("float16", 2**26, backend="cuda", roofline_pct=90.0),
        _row("bfloat16", 2**26, "mean", backend="cuda", roofline_pct=85.0),
        _row("bfloat16", 2**26, backend="cpu", roofline_pct=85.0),  # the CPU's 80% line
    ]
    table, misses = evaluate(rows)
    assert [(m.dtype, m.what, m.goal) for m in misses] == [("bfloat16", "roofline 0-d 2^26", ">= 90%")]
    assert table[0].roofline == {("full", 2**26): 90.0}


def _report(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"header": "losstune bench --report on box\nmedians", "rows": rows}))
    return path


def test_goals_cli_prints_the_table_and_fails_on_a_miss_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _report(tmp_path / "good.json", _met())
    bad = _report(tmp_path / "bad.json", [*_met(), _row(roofline_pct=50.0)])
    assert main(["goals", str(good), str(bad)]) == 0
    out = capsys.readouterr().out
    assert f"{good}: losstune bench --report on box" in out and "1 goal(s) not met:" in out
    assert "- mse float32 roofline full 2^24: 50% (goal >= 90%)" in out
    assert main(["goals", "--fail-on-miss", str(good)]) == 0
    capsys.readouterr()
    assert main(["goals", "--fail-on-miss", "--json", str(bad)]) == 1
    (miss,) = json.loads(capsys.readouterr().out)[str(bad)]
    assert miss == {
        "op": "mse",
        "dtype": "float32",
        "what": "roofline full 2^24",
        "measured": 50.0,
        "goal": ">= 90%",
        "detail": "",  # these hand-written rows carry no GB/s
        "copy_swing": None,  # nor the copy's rounds
    }


def test_goals_cli_refuses_a_file_that_is_not_a_report_before_printing_any(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = _report(tmp_path / "good.json", _met())
    (tmp_path / "table.txt").write_text("op dtype ...")
    old = _report(tmp_path / "old.json", [{"op": "mse", "dtype": "float32"}])
    for bad, why in ((tmp_path / "table.txt", "Expecting value"), (old, "missing numel")):
        assert main(["goals", str(good), str(bad)]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert "reports: expected a report.json" in captured.err and str(bad) in captured.err and why in captured.err


def test_rows_without_a_field_the_goals_read_are_refused_by_name() -> None:
    check_rows(_met())
    with pytest.raises(ValueError, match="row 1: .*missing roofline_pct"):
        check_rows([_row(), {k: v for k, v in _row().items() if k != "roofline_pct"}])
    with pytest.raises(ValueError, match="non-empty list"):
        check_rows({"rows": []})


def _with(rows: list[dict[str, object]], **changes: dict[str, object]) -> list[dict[str, object]]:
    """rows with the row of each named case/size changed: transposed=..., roofline=..."""
    out = []
    for r in rows:
        if r["case"] == "transposed" and "transposed" in changes:
            r = r | changes["transposed"]
        if r["case"] == "contiguous" and r["numel"] == 2**24 and r["reduction"] == "none" and "roofline" in changes:
            r = r | changes["roofline"]
        out.append(r)
    return out


def test_across_tells_goals_missed_in_every_report_from_those_missed_in_some() -> None:
    first = [*_with(_met(), transposed={"tuned_s": 1.6}), _row("bfloat16", 2**24, roofline_pct=70.0)]
    second = _with(_met(), transposed={"tuned_s": 1.7}, roofline={"roofline_pct": 85.0})
    verdicts, met = across([first, second])
    by_what = {v.what: v for v in verdicts}
    assert set(by_what) == {"transposed full 2^22", "roofline full 2^24"}
    transposed = by_what["transposed full 2^22"]
    assert (transposed.measured, transposed.missed) == ((1.6, 1.7), 2)
    assert transposed.line() == "mse float32 transposed full 2^22: 1.60x, 1.70x (goal <= 1.5x)"
    # Two goals share the name "roofline full 2^24" only within one dtype: float32 met then missed,
    # bfloat16 read in the first report alone, where it missed.
    f32 = next(v for v in verdicts if v.dtype == "float32" and v.what.startswith("roofline"))
    bf16 = next(v for v in verdicts if v.dtype == "bfloat16")
    assert (f32.measured, f32.missed) == ((90.0, 85.0), 1)
    assert f32.line() == "mse float32 roofline full 2^24: 90%, 85% (goal >= 90%; missed in 1 of 2)"
    assert bf16.missed == 1 and bf16.line() == "mse bfloat16 roofline full 2^24: 70%, - (goal >= 80%)"
    # Every other goal either report reads is met in each that reads it.
    goals = {(m.op, m.dtype, m.what) for rows in (first, second) for m, _ in _evaluate(rows)[1]}
    assert met == len(goals) - 3
    text = format_across(verdicts, met, 2)
    # bfloat16's row is in the first report only: missed wherever read, but not in every report.
    assert "missed in every report: 1\n- mse float32 transposed" in text
    assert "fewer than 2: 1\n- mse bfloat16 roofline full 2^24: 70%, - (goal >= 80%)\n" in text
    assert "missed in some of the 2 reports: 1\n- mse float32 roofline full 2^24: 90%, 85%" in text
    assert across([_met(), _met()]) == ([], len(goals) - 2)  # without the bfloat16 2^24 row's two


def _hosted(path: Path, rows: list[dict[str, object]], machine: str) -> Path:
    path.write_text(
        json.dumps({"header": f"losstune bench --report on {machine}", "host": {"machine": machine}, "rows": rows})
    )
    return path


def test_goals_cli_across_reports_of_one_machine_and_refuses_a_mix_before_printing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = _hosted(tmp_path / "one.json", _with(_met(), transposed={"tuned_s": 1.6}), "box")
    two = _hosted(tmp_path / "two.json", _met(), "box")
    assert main(["goals", "--across", str(one), str(two)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 reports of box:\n  1. ") and "missed in every report: 0" in out
    assert "- mse float32 transposed full 2^22: 1.60x, 1.50x (goal <= 1.5x; missed in 1 of 2)" in out
    assert main(["goals", "--across", "--json", "--fail-on-miss", str(one), str(two)]) == 1
    (verdict,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert verdict["measured"] == [1.6, 1.5] and verdict["missed"] == 1
    other = _hosted(tmp_path / "other.json", _met(), "elsewhere")
    for args in ([str(one), str(other)], [str(one)]):
        assert main(["goals", "--across", *args]) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "reports: --across expected two or more reports of one machine" in captured.err
    assert f"{other} (elsewhere)" in (main(["goals", "--across", str(one), str(other)]), capsys.readouterr().err)[1]


def test_a_miss_names_its_rows_cpu_wait_where_the_report_has_one() -> None:
    """bench --report records the share of each row's run its threads waited for a CPU: a miss timed
    beside other work reads apart from one timed alone; rows without it (older reports, pandas' NaN)
    carry nothing."""
    over = {"contiguous_x_rounds": [1.52, 1.60, 1.70], "contiguous_x": 1.60, "cpu_wait": 0.31}
    (miss,) = evaluate([*_met(), _row(numel=2**22, case="transposed", tuned_s=1.4, contiguous_s=1.0, **over)])[1]
    assert miss.line() == "mse float32 transposed full 2^22: 1.60x (goal <= 1.5x; rounds 1.52-1.70; CPU wait 31%)"
    (slow,) = evaluate([*_met(), _row(numel=2**16, oneshot_s=2.5, cpu_wait=0.02)])[1]
    assert slow.detail == "CPU wait 2%"
    for absent in (None, float("nan")):
        (bare,) = evaluate([*_met(), _row(numel=2**16, oneshot_s=2.5, cpu_wait=absent)])[1]
        assert bare.detail == ""


def test_recorded_wait_is_a_number_or_none_where_there_is_no_reading() -> None:
    """The one reading of a CPU wait that the report's misses, the tuner's busy-host rule and its
    warning share: NaN (a report through pandas) and None (an OS without scheduler times) are no
    reading, nor is a flag or a string; 0 is a reading."""
    assert recorded_wait(0) == 0.0 and recorded_wait(0.31) == 0.31
    for none in (None, float("nan"), True, "0.3"):
        assert recorded_wait(none) is None


def test_a_miss_on_a_row_whose_copy_moved_says_so_and_the_count_heads_the_misses() -> None:
    """bench --report records the copy's GB/s round by round: a roofline or layout miss on a row whose
    copy's fastest round ran over UNSTEADY_COPY times its slowest was timed while the host's memory
    moved (which the CPU wait does not see), and its line says so; a steady copy, a single round, an
    older report (no rounds, or pandas' NaN) and a small row in cache carry nothing."""
    moved = {"copy_gbps_rounds": [30.0, 36.5, 24.0], "roofline_pct_rounds": [62.0, 80.0, 102.0]}
    (roof,) = evaluate([*_met(), _row(roofline_pct=80.0, cpu_wait=0.01, **moved)])[1]
    assert roof.unsteady and roof.copy_swing == pytest.approx(36.5 / 24.0)
    assert roof.detail == "rounds 62-102; CPU wait 1%; copy moved 1.52x across its rounds"
    layout = {"contiguous_x_rounds": [1.52, 1.60, 1.70], "contiguous_x": 1.60, "copy_gbps_rounds": [20.0, 24.1]}
    (over,) = evaluate([*_met(), _row(numel=2**22, case="transposed", tuned_s=1.4, contiguous_s=1.0, **layout)])[1]
    assert over.line() == (
        "mse float32 transposed full 2^22: 1.60x (goal <= 1.5x; rounds 1.52-1.70; copy moved 1.21x across its rounds)"
    )
    steady = _row(roofline_pct=80.0, copy_gbps_rounds=[30.0, 36.0])  # 1.20x: not over the line
    unread = [_row(roofline_pct=80.0, copy_gbps_rounds=r) for r in ([30.0], [], float("nan"))]
    cached = _row(numel=2**16, oneshot_s=2.5, copy_gbps_rounds=[10.0, 30.0])  # in cache: timer grain
    for row in (steady, *unread, cached):
        (miss,) = evaluate([*_met(), row])[1]
        assert not miss.unsteady and "copy moved" not in miss.detail
    table, misses = evaluate([*_met(), _row(roofline_pct=80.0, **moved), steady])
    assert format_goals(table, misses).splitlines()[len(table) + 3] == (
        "2 goal(s) not met (1 on rows whose copy moved over 1.20x across their rounds):"
    )
    table, misses = evaluate([*_met(), steady])
    assert format_goals(table, misses).splitlines()[len(table) + 3] == "1 goal(s) not met:"
