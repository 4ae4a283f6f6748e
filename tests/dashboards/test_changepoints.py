"""The change-point detector on series with known answers, and the calibration's plumbing."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dashboards import calibrate
from dashboards.changepoints import ChangePoint, detect


def noisy(n: int, seed: int, sigma: float = 0.02, level: float = 1e-4) -> np.ndarray:
    """A benchmark series with no change: lognormal scatter around ``level`` seconds."""
    return level * np.exp(np.random.default_rng(seed).normal(0.0, sigma, n))


def test_single_regression_found_at_its_index() -> None:
    values = noisy(40, seed=1)
    values[22:] *= 1.2
    (cp,) = detect(values)
    assert cp.index == 22 and cp.prev_index == 21 and cp.commit_range == (21, 22)
    assert cp.regression
    assert cp.ratio == pytest.approx(1.2, rel=0.03)
    assert cp.size == pytest.approx(cp.ratio - 1)
    assert cp.after / cp.before == pytest.approx(cp.ratio)
    assert cp.confidence >= 0.99


def test_regression_later_fixed_reports_both_steps() -> None:
    # asv's own page would show nothing here (the latest value is fine again); we want both.
    values = noisy(50, seed=2)
    values[15:24] *= 1.2
    first, second = detect(values)
    assert (first.index, first.regression) == (15, True)
    assert (second.index, second.regression) == (24, False)
    assert first.ratio == pytest.approx(1.2, rel=0.03)
    assert second.ratio == pytest.approx(1 / 1.2, rel=0.03)


def test_two_regressions_in_one_series_are_each_found_at_their_index() -> None:
    """The detector cuts the series where the strongest change is, then each side again: two steps
    the same way (a regression later fixed is found as a whole by one cut, this is not)."""
    values = noisy(60, seed=3)
    values[20:] *= 1.2
    values[40:] *= 1.3
    first, second = detect(values)
    assert (first.index, first.regression) == (20, True) and (second.index, second.regression) == (40, True)
    assert first.ratio == pytest.approx(1.2, rel=0.03) and second.ratio == pytest.approx(1.3, rel=0.03)


@pytest.mark.parametrize("tails", ["normal", "student-t3"])
def test_pure_noise_false_positive_rate_is_small(tails: str) -> None:
    # Each window is tested at max_p = 0.01 with the cut's selection paid for by the permutation
    # scan, so a no-change series should be flagged about 1% of the time (measured over 1000
    # series: 0.9% normal, 1.1% t3 at n = 50). With 300 series the binomial sd at 1% is 0.6%, so
    # 3.5% is a bound a correct detector does not trip, while a test that ignored the selection
    # of the cut (Welch's t at the best split against its 1% quantile) flags ~46% of them.
    rng = np.random.default_rng(1234 if tails == "normal" else 4321)
    series = 300
    flagged = 0
    for _ in range(series):
        noise = rng.normal(0.0, 0.02, 50) if tails == "normal" else 0.02 * rng.standard_t(3, 50)
        flagged += bool(detect(1e-4 * np.exp(noise)))
    assert flagged / series <= 0.035


def test_heavy_tailed_lone_outliers_are_not_steps() -> None:
    values = noisy(40, seed=3)
    values[[7, 19, 31]] *= 1.6  # single slow runs: a stray process on a shared host
    assert detect(values) == []


def test_contended_runs_are_skipped_but_a_real_3x_regression_is_kept() -> None:
    # A run sharing this 2-core host with another job is ~6x slower: it measured the host.
    values = noisy(40, seed=12)
    values[20:] *= 1.2
    values[[4, 9, 15, 19, 25, 33]] *= 6  # one of them right before the step
    (cp,) = detect(values)
    assert cp.index == 20 and cp.commit_range == (18, 20)  # the range spans the skipped run
    assert cp.ratio == pytest.approx(1.2, rel=0.03)
    gbps = noisy(40, seed=12, level=30.0)
    gbps[20:] *= 0.8
    gbps[[4, 9, 15, 19, 25, 33]] /= 6  # contention lowers a bandwidth: the worse side again
    (cp,) = detect(gbps, lower_is_better=False)
    assert (cp.index, cp.regression) == (20, True)
    # A level that lasts is a level, however large: 3x slower from point 30 on is reported.
    values = noisy(40, seed=11)
    values[30:] *= 3
    (cp,) = detect(values)
    assert cp.index == 30 and cp.ratio == pytest.approx(3.0, rel=0.03)


def test_scattered_contention_alone_is_no_change() -> None:
    values = noisy(40, seed=10)
    values[[5, 12, 13, 27]] *= 6  # including two in a row
    assert detect(values) == []
    assert detect(values, gross=None) == []  # the permutation test alone copes with this much


def test_step_below_min_change_is_not_reported() -> None:
    values = noisy(60, seed=4, sigma=0.002)
    values[30:] *= 1.015  # highly significant against 0.2% noise, but under the 2% min_change
    assert detect(values) == []
    assert [cp.index for cp in detect(values, min_change=0.01)] == [30]


def test_nan_points_are_skipped_and_indices_stay_original() -> None:
    values = noisy(40, seed=5)
    values[20:] *= 1.3
    values[[3, 18, 19, 33]] = np.nan  # failed runs, two of them right before the step
    values_list: list[float | None] = [None if math.isnan(v) else float(v) for v in values]
    for series in (values, values_list):
        (cp,) = detect(series)
        assert cp.index == 20 and cp.prev_index == 17 and cp.commit_range == (17, 20)
        assert cp.ratio == pytest.approx(1.3, rel=0.03)


def test_higher_is_better_flips_the_direction() -> None:
    gbps = noisy(40, seed=6, level=30.0)
    gbps[25:] *= 0.8  # bandwidth dropped: a regression
    (cp,) = detect(gbps, lower_is_better=False)
    assert cp.regression and cp.ratio == pytest.approx(0.8, rel=0.03)
    (same,) = detect(gbps)  # the same drop read as a time is an improvement
    assert not same.regression


def test_spreads_larger_than_the_step_suppress_it() -> None:
    values = noisy(40, seed=7, sigma=0.005)
    values[20:] *= 1.08
    assert [cp.index for cp in detect(values, np.full(40, 0.05))] == [20]
    # Runs whose own p20-p80 width is 30% cannot vouch for an 8% move of their median.
    assert detect(values, np.full(40, 0.30)) == []


def test_short_series_and_end_segments() -> None:
    assert detect([]) == []
    assert detect([1.0, 1.0, 2.0]) == []  # < 2 * min_segment points
    assert detect([1.0, np.nan, 1.0, 2.0, 2.0], min_segment=3) == []
    values = noisy(40, seed=8)
    values[-1] *= 1.5  # one point is not a segment
    assert detect(values) == []
    values[-2] *= 1.5  # two are, at the default min_segment
    (cp,) = detect(values)
    assert cp.index == 38 and cp.regression
    # With min_segment=3 a step can only be placed with 3 points after it, never at 38.
    assert all(cp.index <= 37 for cp in detect(values, min_segment=3))


def test_noise_free_step_and_constant_series() -> None:
    assert detect([2.0] * 30) == []
    (cp,) = detect([2.0] * 15 + [3.0] * 15)
    assert (cp.index, cp.ratio, cp.regression) == (15, 1.5, True)


def test_deterministic_and_validated() -> None:
    values = noisy(50, seed=9)
    values[10:] *= 1.04
    assert detect(values) == detect(values)
    with pytest.raises(ValueError):
        detect(values, np.ones(3))
    with pytest.raises(ValueError):
        detect(values, min_segment=0)


def test_change_point_is_frozen() -> None:
    cp = ChangePoint(index=3, before=1.0, after=0.9, ratio=0.9, confidence=0.99, regression=False)
    assert cp.size == pytest.approx(0.1) and cp.commit_range == (2, 3)
    with pytest.raises(AttributeError):
        cp.index = 4  # type: ignore[misc]


def synthetic_aa(cases: int = 3, points: int = 30, sigma: float = 0.01) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {"point": p, "case": f"c{c}", "median_s": 1e-3 * (c + 1) * math.exp(rng.normal(0, sigma)), "spread": 0.02}
        for c in range(cases)
        for p in range(points)
    ]
    return pd.DataFrame(rows)


def test_evaluate_plumbing_on_synthetic_aa() -> None:
    report = calibrate.evaluate(synthetic_aa(), steps=(0.01, 0.2), trials=24, seed=1)
    fp = report["false_positives"]
    assert fp["with_spreads"]["ordered"]["series"] == 3
    assert fp["with_spreads"]["windows"]["series"] == 24
    assert 0.0 <= fp["values_only"]["shuffled"]["fraction"] <= 1.0
    small, big = report["detection"]
    # Under min_change: only chance (noise pushing the measured size past 2%) can report it.
    assert small["step"] == 0.01 and small["with_spreads"]["detected"] <= 0.1
    assert big["trials"] == 24 and big["with_spreads"]["detected"] >= 0.9  # 20% against 1% noise
    assert big["with_spreads"]["mean_abs_location_error"] <= 1
    assert [row["case"] for row in report["noise"]] == ["c0", "c1", "c2"]
    assert report == calibrate.evaluate(synthetic_aa(), steps=(0.01, 0.2), trials=24, seed=1)
    assert report["without_gross_drop"]["detection"][1]["trials"] == 24  # the ablation, same trials
    assert "no gross drop" in calibrate.format_table(report)


def test_main_evaluate_writes_json_atomically(tmp_path) -> None:
    synthetic_aa().to_csv(tmp_path / calibrate.CSV_NAME, index=False)
    assert calibrate.main(["--evaluate", "--trials", "8", "--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / calibrate.JSON_NAME).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [calibrate.CSV_NAME, calibrate.JSON_NAME]  # no tmp left


def test_collect_aa_tiny_run_uses_fresh_processes() -> None:
    # Two points of one small case: about two interpreter starts (torch import + numba compile).
    aa = calibrate.collect_aa(n_points=2, cases=["mse/4096/mean"], min_time_s=0.005)
    assert list(aa["point"]) == [0, 1] and set(aa["case"]) == {"mse/4096/mean"}
    # The points ran HEAD's kernels from a snapshot, not whatever the shared working tree holds.
    assert aa.attrs["source"] == calibrate._git("rev-parse", "HEAD")
    assert (aa["median_s"] > 0).all() and (aa["spread"] >= 0).all() and (aa["runs"] >= 5).all()
    assert (aa["p20_s"] <= aa["median_s"]).all() and (aa["median_s"] <= aa["p80_s"]).all()
