"""The asv suite's own logic, run in-process on the CPU with tiny cases (asv itself is driven in
tests/benchmarks/test_asv_continuous.py)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from benchmarks import losses
from tests.helpers import count_copy_runs
from tuner.problems import Case


def test_params_cover_every_op_dtype_shape_and_config_including_the_0d_gradient() -> None:
    backends, ops, dtypes, shapes, configs = losses.LossBackward.params
    assert "cpu" in backends and "triton-interpret" not in backends
    assert set(ops) == {"mse", "l1", "kl_div", "kl_div-log"}
    assert set(dtypes) == {"float32", "float16", "bfloat16"}
    assert any(s.endswith(" mean") for s in shapes) and any(s.endswith(" none") for s in shapes)
    assert configs == ["tuned", "default", "vendor"]


def test_measure_all_reports_units_and_writes_meta_beside_the_run(tmp_path: Path) -> None:
    cache = losses.measure_all(
        ["mse", "kl_div-log"],
        ["float32", "bfloat16"],
        ["2^10 none", "2^10 mean"],
        ["cpu"],
        min_time_s=0.002,
        rounds=1,
        root=tmp_path,
    )
    assert cache["loaded"] == ["cpu"]
    bench = losses.LossBackward()
    for key, entry in cache["results"].items():
        params = key.split("|")
        bench.setup(cache, *params)
        assert bench.track_time(cache, *params) == entry["seconds"] > 0
        assert bench.track_bandwidth(cache, *params) == pytest.approx(entry["bytes"] / entry["seconds"] / 1e9)
        assert bench.track_roofline(cache, *params) > 0
        assert bench.track_roofline_paired(cache, *params) == statistics.median(entry["roofline_pct_rounds"])
        assert len(entry["roofline_pct_rounds"]) == 1  # one round: one ratio
        assert entry["p20_s"] <= entry["seconds"] <= entry["p80_s"]
    assert len(cache["results"]) == 2 * 2 * 2 * 3
    (meta_file,) = (tmp_path / "results" / "asv-meta").glob("*/*.json")
    meta = json.loads(meta_file.read_text())
    assert meta["host"]["machine"] == meta_file.parent.name and "accelerators" in meta["host"]
    assert meta["backends"]["cpu"]["device"] and meta["results"] == cache["results"]
    assert all(e["roofline_gbps"] > 0 for e in meta["results"].values())
    assert not list(meta_file.parent.glob("*.tmp"))


def test_the_paired_roofline_takes_each_rounds_kernel_over_that_rounds_copy() -> None:
    """Made-up round times: a kernel of 2, 2, 6 s moving 100 bytes, a copy of 1, 3, 4 s moving 100:
    50, 150 and 67% round by round, median 67%; the ratio of the medians would read 150%."""
    rounds = losses._paired_pct(100, [2.0, 2.0, 6.0], 100, [1.0, 3.0, 4.0])
    assert rounds == pytest.approx([50.0, 150.0, 400 / 6])
    assert statistics.median(rounds) == pytest.approx(400 / 6)
    with pytest.raises(ValueError):  # a round without its copy is a bug, not a shorter median
        losses._paired_pct(100, [2.0, 2.0], 100, [1.0])


def test_a_backend_that_does_not_load_is_skipped_not_failed(tmp_path: Path) -> None:
    cache = losses.measure_all(["mse"], ["float32"], ["2^10 none"], ["npu"], min_time_s=0.002, rounds=1, root=tmp_path)
    assert cache["loaded"] == []
    with pytest.raises(NotImplementedError):  # asv records NotImplementedError in setup as skipped
        losses.LossBackward().setup(cache, "npu", "mse", "float32", "2^10 none", "tuned")


def test_wrong_kernel_cannot_post_a_number_reference_mocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plumbing only: the reference is skewed by 1% so the (correct) kernels look wrong."""
    real = Case.reference
    monkeypatch.setattr(Case, "reference", lambda self, g, x, t: real(self, g, x, t) * 1.01)
    cache = losses.measure_all(["l1"], ["float32"], ["2^10 none"], ["cpu"], min_time_s=0.002, rounds=1, root=tmp_path)
    entry = cache["results"][losses.key("cpu", "l1", "float32", "2^10 none", "tuned")]
    assert "elements off" in entry["error"] and "seconds" not in entry
    with pytest.raises(AssertionError, match="is wrong"):
        losses.LossBackward().setup(cache, "cpu", "l1", "float32", "2^10 none", "tuned")


def test_the_roofline_copy_is_timed_in_the_cases_own_rounds_plumbing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plumbing (the copy is real, only counted): each case's roofline comes from a copy timed in
    that case's shuffled rounds, never from the per-process cached probe."""
    calls = count_copy_runs(monkeypatch)
    cache = losses.measure_all(["mse"], ["float32"], ["2^10 none"], ["cpu"], min_time_s=0.001, rounds=3, root=tmp_path)
    assert calls["copy"] >= 3 * 5  # every round, each at least measure()'s min_runs
    entries = [cache["results"][losses.key("cpu", "mse", "float32", "2^10 none", c)] for c in losses.CONFIGS]
    assert len({e["roofline_gbps"] for e in entries}) == 1  # one copy, the case's own
    for e in entries:
        assert e["roofline_pct"] == pytest.approx(100 * e["gbps"] / e["roofline_gbps"])


def test_a_commit_without_copy_probe_uses_the_cached_copy_plumbing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plumbing: asv runs this suite against older commits, whose timing module has only
    copy_bandwidth(device, nbytes); the suite must still measure them."""
    from kernels import timing

    seen: list[int] = []

    def old_copy_bandwidth(device: str, nbytes: int) -> float:
        seen.append(nbytes)
        return 10e9

    monkeypatch.delattr(timing, "copy_probe")
    monkeypatch.setattr(timing, "copy_bandwidth", old_copy_bandwidth)
    cache = losses.measure_all(["l1"], ["float32"], ["2^10 none"], ["cpu"], min_time_s=0.001, rounds=1, root=tmp_path)
    entry = cache["results"][losses.key("cpu", "l1", "float32", "2^10 none", "tuned")]
    # l1 reads g, x and t and writes out: 16 KiB of traffic, a copy of 8 KiB buffers (half of it)
    assert seen == [8192] and entry["roofline_gbps"] == pytest.approx(10.0)
    assert entry["roofline_pct"] == pytest.approx(entry["gbps"] / 10.0 * 100)
    assert entry["roofline_pct_rounds"] == [] and entry["roofline_paired_pct"] == entry["roofline_pct"]
