"""Loaders over real files (a tiny asv results tree written the way asv 0.6 writes it, the shipped
frozen tables, a journal made by a real tuning run) and the regression table over known steps."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dashboards import loaders, site
from dashboards.regressions import find_changes
from kernels.frozen import CONFIG_DIR as CONFIGS
from tests.helpers import count_journal_storages
from tuner.cli import main
from tuner.study import study_rows

PARAMS = [["'cpu'"], ["'mse'"], ["'float32'"], ["'2^16 none'", "'2^22 none'"], ["'tuned'", "'vendor'"]]
NAMES = ["backend", "op", "dtype", "shape", "config"]


def _write_asv(
    root: Path, levels: list[list[float]], machine: str = "box", forced: dict[int, dict[str, str]] | None = None
) -> None:
    """asv 0.6 result files: one per commit, values in itertools.product order of the params;
    ``forced``: the CPU loop switches the run of commit i had set, as its meta file stores them."""
    res = root / "asv"
    (res / machine).mkdir(parents=True, exist_ok=True)
    bench = {"params": PARAMS, "param_names": NAMES, "unit": "seconds", "type": "track"}
    (res / "benchmarks.json").write_text(json.dumps({"losses.LossBackward.track_time": bench, "version": 2}))
    (res / machine / "machine.json").write_text(json.dumps({"machine": machine, "version": 1}))
    for i, values in enumerate(levels):
        run = {
            "commit_hash": f"{i:040x}",
            "env_name": "env",
            "date": 1_700_000_000_000 + i * 60_000,
            "params": {"machine": machine},
            "result_columns": ["result", "params", "version", "started_at", "duration"],
            "results": {"losses.LossBackward.track_time": [values, PARAMS, "v", 0, 1.0]},
            "version": 2,
        }
        (res / machine / f"{i:08x}-env.json").write_text(json.dumps(run))
        meta = {
            "host": {"accelerators": [], "cpu_forced": (forced or {}).get(i, {})},
            "backends": {"cpu": {"copy_gbps": 30.0}},
            "results": {
                "cpu|mse|float32|2^16 none|tuned": {"p20_s": values[0] * 0.99, "p80_s": values[0] * 1.01, "runs": 9}
            },
        }
        (root / "asv-meta" / machine).mkdir(parents=True, exist_ok=True)
        (root / "asv-meta" / machine / f"{i:040x}.json").write_text(json.dumps(meta))


def _levels(n: int = 24, seed: int = 0) -> list[list[float]]:
    """Series 0 regresses +30% at commit 8 and is fixed at 16; series 2 improves 40% at 12."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        a = 30e-6 * (1.3 if 8 <= i < 16 else 1.0)
        c = 2e-3 * (0.6 if i >= 12 else 1.0)
        rows.append([v * (1 + 0.005 * rng.standard_normal()) for v in (a, 15e-6, c, 1.5e-3)])
    return rows


def test_load_asv_is_tidy_with_meta_and_history_order(tmp_path: Path) -> None:
    _write_asv(tmp_path, _levels())
    df = loaders.load_asv(tmp_path / "asv", repo=None)
    assert len(df) == 24 * 4 and set(df["metric"]) == {"time"}
    assert list(df.drop_duplicates("commit")["order"]) == list(range(24))
    first = df[(df["order"] == 0) & (df["shape"] == "2^16 none") & (df["config"] == "tuned")].iloc[0]
    assert first["backend"] == "cpu" and first["p20"] < first["value"] < first["p80"] and first["copy_gbps"] == 30.0


def test_every_change_point_is_listed_with_its_commit_range_and_the_fix_marked(tmp_path: Path) -> None:
    _write_asv(tmp_path, _levels())
    changes = find_changes(loaders.load_asv(tmp_path / "asv", repo=None))
    a = changes[(changes["shape"] == "2^16 none") & (changes["config"] == "tuned")].reset_index()
    assert list(a["order_after"]) == [8, 16], a
    assert a.loc[0, "regression"] and not a.loc[1, "regression"]
    assert a.loc[0, "size_pct"] == pytest.approx(30, abs=3) and a.loc[0, "status"] == "reverted later"
    assert a.loc[0, "commit_before"] == f"{7:040x}" and a.loc[0, "commit_after"] == f"{8:040x}"
    c = changes[(changes["shape"] == "2^22 none") & (changes["config"] == "tuned")]
    assert list(c["order_after"]) == [12] and not c["regression"].any() and (c["confidence"] > 0.99).all()
    flat = changes[changes["config"] == "vendor"]
    assert flat.empty, "flat series must not produce change points"


@pytest.mark.parametrize("metric", ["bandwidth", "roofline", "time"])
def test_a_drop_in_bandwidth_or_roofline_is_the_regression_a_rise_in_time_is(metric: str) -> None:
    """Higher is better for every metric but time: a bandwidth that falls by 30% is a regression,
    the time that rises with it too, and each series' recovery is not."""
    noisy_level = 1.0 + 0.004 * np.random.default_rng(5).standard_normal(24)
    worse = np.where((np.arange(24) >= 8) & (np.arange(24) < 16), 1.3, 1.0)
    values = noisy_level * (worse if metric == "time" else 1 / worse) * (30e-6 if metric == "time" else 50.0)
    frame = pd.DataFrame(
        {
            "machine": "box",
            "metric": metric,
            "commit": [f"{i:040x}" for i in range(24)],
            "order": range(24),
            "value": values,
        }
    )
    changes = find_changes(frame, metric=metric)
    assert list(changes["order_after"]) == [8, 16], changes
    assert list(changes["regression"]) == [True, False]


def test_a_dashboard_build_replays_the_journal_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The site's data reads the trials and the finals of one journal: one storage (tuner.study.shared_journals),
    whose opening replays the whole log. A spy on the storage's construction counts them (plumbing); the journal and
    the loaders are real."""
    storage = str(tmp_path / "journal.log")
    argv = ["tune", "--op", "l1", "--shape", "2^10", "--storage", storage, "--trials", "2", "--min-time", "0.002"]
    assert main([*argv, "--no-progress"]) == 0
    made = count_journal_storages(monkeypatch)
    data = site.collect(tmp_path, storage=storage, repo=None)
    assert made == ["journal"] and len(data.finals) == 1 and len(data.trials) > 0


def test_tuning_loaders_read_a_real_journal(tmp_path: Path) -> None:
    storage = str(tmp_path / "journal.log")
    argv = ["tune", "--op", "l1", "--shape", "2^10", "--storage", storage, "--trials", "5", "--min-time", "0.002"]
    assert main([*argv, "--no-progress"]) == 0
    trials = loaders.load_tuning(storage)
    done = trials[trials["state"] == "COMPLETE"]  # the rest of the grid stays enqueued (WAITING)
    assert len(done) == 5 and {"tile", "cores", "seconds", "case"} <= set(trials.columns)
    assert done["seconds"].gt(0).all() and done["tile"].notna().all()
    finals = loaders.load_finals(storage)
    assert len(finals) == 1 and finals.loc[0, "op"] == "l1" and finals.loc[0, "median_s"] > 0
    # the gate's reading, shown in the studies table (none where the default itself was fastest)
    chance = finals.loc[0, "chance"]
    assert "chance" in finals.columns and (pd.isna(chance) or 0 < chance <= 1)
    pages = site.build(tmp_path / "site", tmp_path, storage=storage, repo=None)
    studies = next(p.read_text() for p in pages if 'id="studies-table"' in p.read_text())
    head = studies.split('id="studies-table"')[1].split("</thead>")[0]
    assert ">noise</th><th" in head and ">chance</th><th" in head and ">confirmed</th>" in head
    # none where the first rounds kept the baseline, else whether the winner stood in fresh rounds
    (decided,) = (row["final"] for row in study_rows(storage))
    want, got = decided.get("confirmed"), finals.loc[0, "confirmed"]
    assert pd.isna(got) if want is None else got == want
    assert finals.loc[0, "median_s"] == decided["median_s"] and finals.loc[0, "tuned"] == decided["tuned"]
    assert loaders.load_tuning(str(tmp_path / "missing.log")).empty


def test_tuning_figures_leave_out_an_earlier_spaces_trials(tmp_path: Path) -> None:
    """A study resumed under a grown space (here: one knob fewer before) keeps the old trials as
    history; the landscape and convergence figures read only the latest sweep, where the old
    trials' impossible 1 ns times would have been every panel's best and its trial 0."""
    import optuna
    import torch

    from dashboards import figures
    from kernels.modes import Op, Reduction
    from tuner import study as st
    from tuner.problems import Case

    storage = str(tmp_path / "journal.log")
    case = Case(Op.L1, torch.float32, (1 << 12,), Reduction.NONE)
    bench = st._Bench.make(case, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(case, bench, "cpu"), storage=st.open_storage(storage))
    old = {name: values for name, values in st._choices(space).items() if name != "stream"}
    dists = {name: optuna.distributions.CategoricalDistribution(values) for name, values in old.items()}
    for config in space.sample(2, seed=3):
        params = {k: v for k, v in st._params(space, config).items() if k in old}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=1e-9))
    st.tune_case(case, st.TuneOptions(storage=storage, sampler="grid", trials=3, min_time_s=0.002, rounds=2))

    trials = loaders.load_tuning(storage)
    assert trials.sort_values("trial")["current"].tolist()[:2] == [False, False]
    done = figures._completed(trials)
    assert len(done) == 3 and done["current"].all() and done["seconds"].min() > 1e-6
    assert figures.landscapes(trials) is not None and figures.convergence(trials) is not None


def test_tuning_figures_leave_out_trials_of_an_edited_kernel(tmp_path: Path) -> None:
    """A study resumed after a kernel edit (tuner.study.Sweep): the trials tagged with the old
    kernel's hash are history beside the new decision; those of a hash restamp carried the decision
    across are not."""
    import optuna
    import torch

    from kernels.modes import Op, Reduction
    from tuner import study as st
    from tuner.problems import Case

    storage = str(tmp_path / "journal.log")
    case = Case(Op.L1, torch.float32, (1 << 12,), Reduction.NONE)
    bench = st._Bench.make(case, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(case, bench, "cpu"), storage=st.open_storage(storage))
    dists = {name: optuna.distributions.CategoricalDistribution(values) for name, values in st._choices(space).items()}
    today = st.Sweep.of(study, space, "cpu", "l1").kernel
    configs = [*space.sample(3, seed=3), space.default]
    for config, kernel in zip(configs, ("0" * 16, "1" * 16, "1" * 16, today), strict=True):
        tags = {"space_hash": space.hash, "kernel_hash": kernel}
        params = st._params(space, config)
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=1e-4, user_attrs=tags))
    study.set_user_attr("space_hash", space.hash)  # as tune_case records it
    study.set_user_attr("final", st.restamped_final({"kernel_hash": "1" * 16, "config": {}}, today))

    trials = loaders.load_tuning(storage).sort_values("trial")
    assert trials["current"].tolist() == [False, True, True, True]

    # then the loops change again: a sweep under way on the new kernel, beside the decision on today's
    # and a trial from before the tag, is the latest sweep
    untagged = optuna.trial.create_trial(params=st._params(space, space.default), distributions=dists, value=1e-4)
    study.add_trial(untagged)
    newer = {"space_hash": space.hash, "kernel_hash": "3" * 16}
    for config in space.sample(2, seed=4):
        params = st._params(space, config)
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=1e-4, user_attrs=newer))
    trials = loaders.load_tuning(storage).sort_values("trial")
    assert trials["current"].tolist() == [False, False, False, False, False, True, True]


@pytest.mark.parametrize("between", [False, True], ids=["decided-timed-alone", "decided-between-copies"])
def test_tuning_figures_agree_with_the_sweep_on_how_trials_were_timed(tmp_path: Path, between: bool) -> None:
    """Trials from before the timing tag, then a launch-by-launch sweep's, then a run-by-run one's:
    the figures keep as current exactly the trials tuner.study.Sweep.holds counts for the latest
    clock, beside a decision timed alone (the untagged were timed run by run) or between copies."""
    import optuna
    import torch

    from kernels.modes import Op, Reduction
    from tuner import study as st
    from tuner.problems import Case

    storage = str(tmp_path / "journal.log")
    case = Case(Op.L1, torch.float32, (1 << 12,), Reduction.NONE)
    space = st._Bench.make(case, "cpu").executor(None).space
    study = optuna.create_study(study_name="l1-timed", storage=st.open_storage(storage))
    dists = {name: optuna.distributions.CategoricalDistribution(values) for name, values in st._choices(space).items()}
    today = st.Sweep.of(study, space, "cpu", "l1").kernel
    for i, config in enumerate(space.sample(4, seed=5)):
        tags = {"space_hash": space.hash, "kernel_hash": today} | ({"timed": "launch+copy"} if i >= 2 else {})
        params = st._params(space, config)
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=1e-4, user_attrs=tags))
    study.set_user_attr("space_hash", space.hash)
    study.set_user_attr("final", {"kernel_hash": today, "config": {}, "copy_between": between})

    trials = loaders.load_tuning(storage).sort_values("trial")
    assert trials["current"].tolist() == [between, between, True, True]
    sweep = st.Sweep.of(study, space, "cpu", "l1", st.Timed.LAUNCH_COPY)
    assert [sweep.holds(t) for t in study.get_trials(deepcopy=False)] == trials["current"].tolist()
    # then a run-by-run sweep's trial: its clock is the latest; the untagged are of it where timed so
    run = {"space_hash": space.hash, "kernel_hash": today, "timed": "run"}
    params = st._params(space, space.default)
    study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=1e-4, user_attrs=run))
    trials = loaders.load_tuning(storage).sort_values("trial")
    assert trials["current"].tolist() == [not between, not between, False, False, True]
    sweep = st.Sweep.of(study, space, "cpu", "l1", st.Timed.RUN)
    assert [sweep.holds(t) for t in study.get_trials(deepcopy=False)] == trials["current"].tolist()


def test_runs_with_cpu_loop_switches_set_are_a_history_of_their_own(tmp_path: Path) -> None:
    """Commits 8-15 ran with a loop switch set and 1.3x slower (other loops): they are a series of
    their own, so neither they nor the machine's own runs show a step; tagged as the machine's own,
    the same numbers read as a regression at 8 and its fix at 16."""
    levels = [[v * (1.3 if 8 <= i < 16 else 1.0) for v in row] for i, row in enumerate(_levels())]
    forced = dict.fromkeys(range(8, 16), {"LOSSTUNE_CPU_FUSED": "1"})
    _write_asv(tmp_path / "tagged", levels, forced=forced)
    _write_asv(tmp_path / "untagged", levels)
    df = loaders.load_asv(tmp_path / "tagged" / "asv", repo=None)
    assert set(df[df["order"].between(8, 15)]["cpu_forced"]) == {"LOSSTUNE_CPU_FUSED=1"}
    assert set(df[~df["order"].between(8, 15)]["cpu_forced"]) == {""}
    tuned = "shape == '2^16 none' and config == 'tuned'"
    changes = find_changes(df).query(tuned)
    assert changes.empty, changes
    untagged = find_changes(loaders.load_asv(tmp_path / "untagged" / "asv", repo=None)).query(tuned)
    assert list(untagged["order_after"]) == [8, 16] and set(untagged["cpu_forced"]) == {""}


def test_trends_are_drawn_per_machine_and_per_set_of_switches(tmp_path: Path) -> None:
    """Two machines' runs, and one machine's runs with a switch set, are each a figure of their own,
    named: a line across them read the change of host as a step."""
    _write_asv(tmp_path, _levels(12), machine="zen4")
    _write_asv(tmp_path, _levels(12, seed=1), machine="xeon", forced={11: {"LOSSTUNE_CPU_COARSE": "0"}})
    out = tmp_path / "site"
    site.build(out, tmp_path, storage=str(tmp_path / "none.log"), repo=None)
    page = (out / "trends.html").read_text()
    titles = ["xeon", "zen4", "xeon, CPU loops forced by LOSSTUNE_CPU_COARSE=0"]
    assert re.findall(r"<h3>([^<]*)</h3>", page) == titles
    assert re.findall(r'<img alt="([^"]*)"', page) == [f"trends {t}" for t in titles]


def test_the_switches_column_shows_where_a_row_set_one() -> None:
    """Decisions from before the field (NaN) and runs with none set ("") show no column of blanks."""
    assert site._forced_column(pd.DataFrame({"cpu_forced": ["", np.nan]})) == []
    assert site._forced_column(pd.DataFrame({"case": ["mse"]})) == []
    assert site._forced_column(pd.DataFrame({"cpu_forced": [np.nan, "LOSSTUNE_CPU_APART=1"]})) == ["cpu_forced"]


def test_frozen_loader_reads_the_shipped_tables() -> None:
    frozen = loaders.load_frozen()
    assert not frozen.empty and {"op", "dtype", "config", "tuned", "file"} <= set(frozen.columns)
    for path in sorted(CONFIGS.glob("*/*.json")):  # a row an entry, each with the entry's own fields
        entries = json.loads(path.read_text())["entries"]
        rows = frozen[frozen["file"] == f"{path.parent.name}/{path.name}"].reset_index(drop=True)
        assert len(rows) == len(entries), path
        for field in ("op", "dtype", "bucket", "layout", "kernel_hash"):
            assert list(rows[field]) == [e[field] for e in entries], (path, field)


def test_bench_loader_reads_one_report_per_machine_and_names_each(tmp_path: Path) -> None:
    for machine, us in (("x86_64-avx2-2t-cpu-only", 9.0), ("x86_64-avx512-2t-cpu-only", 4.0)):
        (tmp_path / machine).mkdir()
        report = {
            "commit": "abc1234",
            "host": {"machine": "x86_64-2t-cpu-only"},
            "rows": [{"op": "mse", "tuned_us": us}],
        }
        (tmp_path / machine / "report.json").write_text(json.dumps(report))
    bench = loaders.load_bench(tmp_path)
    assert list(bench.columns[:2]) == ["machine", "commit"]
    assert bench.set_index("machine")["tuned_us"].to_dict() == {
        "x86_64-avx2-2t-cpu-only": 9.0,
        "x86_64-avx512-2t-cpu-only": 4.0,
    }
    one = loaders.load_bench(tmp_path / "x86_64-avx2-2t-cpu-only" / "report.json")
    assert one.loc[0, "machine"] == "x86_64-2t-cpu-only"  # a lone file names itself
    assert loaders.load_bench(tmp_path / "absent").empty


def test_goal_misses_names_each_machine_and_its_misses(tmp_path: Path) -> None:
    row = {"op": "mse", "dtype": "float32", "numel": 2**24, "reduction": "none", "case": "contiguous"}
    row |= {"tuned_s": 1.0, "oneshot_s": 1.0, "contiguous_s": 0.0, "speedup_vs_vendor": 2.0}
    # xeon's report has the bandwidths, avx2's (an older one) not: pandas gives it NaN there.
    for machine, extra in (
        ("zen", {"roofline_pct": 95.0}),
        ("xeon", {"roofline_pct": 70.0, "gbps": 28.0, "copy_gbps": 40.0}),
        ("avx2", {"roofline_pct": 60.0}),
    ):
        (tmp_path / machine).mkdir()
        report = {"commit": "abc1234", "rows": [row | extra]}
        (tmp_path / machine / "report.json").write_text(json.dumps(report))
    misses = loaders.goal_misses(loaders.load_bench(tmp_path))
    common = {"commit": "abc1234", "op": "mse", "dtype": "float32", "what": "roofline full 2^24", "goal": ">= 90%"}
    assert sorted(misses.to_dict("records"), key=lambda m: m["machine"]) == [
        {"machine": "avx2", **common, "measured": 60.0, "detail": ""},
        {"machine": "xeon", **common, "measured": 70.0, "detail": "kernel 28.0 GB/s, copy 40.0 GB/s"},
    ]
    assert list(loaders.goal_misses(loaders.load_bench(tmp_path / "absent")).columns)[:2] == ["machine", "commit"]


def test_build_replaces_the_site_whole_and_keeps_the_old_one_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_asv(tmp_path, _levels())
    out = tmp_path / "site"
    pages = site.build(out, tmp_path, storage=str(tmp_path / "none.log"), repo=None)
    assert all(p.exists() for p in pages)
    html = (out / "regressions.html").read_text()
    assert "reverted later" in html and "http" not in html.replace("http-equiv", "")
    before = (out / "index.html").read_text()

    def broken(*a: object, **k: object) -> None:
        raise RuntimeError("figure failed")

    monkeypatch.setattr(site.figures, "trends", broken)
    with pytest.raises(RuntimeError):
        site.build(out, tmp_path, storage=str(tmp_path / "none.log"), repo=None)
    assert (out / "index.html").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site")) == []


def test_build_after_one_killed_between_its_renames_and_one_killed_mid_write(tmp_path: Path) -> None:
    """SIGTERM and SIGKILL run no cleanup: a build killed between moving the old site aside and
    moving the new one in left ``.site-old``, after which every build stopped on it (Directory not
    empty); one killed while writing left its folder. The next build sweeps both away (once they
    are older than a build could be) and replaces the site; a younger folder, maybe a build running
    beside it, stays."""
    _write_asv(tmp_path, _levels())
    out = tmp_path / "site"
    site.build(out, tmp_path, storage=str(tmp_path / "none.log"), repo=None)
    killed = [tmp_path / ".site-old", tmp_path / ".site-abcd1234"]
    for left in killed:
        left.mkdir()
        (left / "index.html").write_text("a site of an earlier build")
        os.utime(left, (time.time() - site.LEFTOVER_S - 60,) * 2)
    running = tmp_path / ".site-efgh5678"
    running.mkdir()
    pages = site.build(out, tmp_path, storage=str(tmp_path / "none.log"), repo=None)
    assert all(p.exists() for p in pages)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site")) == [running.name]


def test_cli_dashboard_build_and_serve_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write_asv(tmp_path, _levels())
    assert main(["dashboard", "build", "--results", str(tmp_path), "--out", str(tmp_path / "d")]) == 0
    assert "wrote 6 pages" in capsys.readouterr().out
    assert main(["dashboard", "serve", "--site", str(tmp_path / "nowhere")]) == 2
    assert "run `losstune dashboard build` first" in capsys.readouterr().err
    assert pd.read_json(tmp_path / "d" / "data.json", typ="series")["commits"] == 24
    # a mistyped --results once built an empty site over the good one
    built = (tmp_path / "d" / "index.html").read_text()
    missing = tmp_path / "resluts"
    assert main(["dashboard", "build", "--results", str(missing), "--out", str(tmp_path / "d")]) == 2
    said = f"--results: expected a results folder (asv/, tuning/, bench/), got {missing} (no such folder)"
    assert said in capsys.readouterr().err
    assert (tmp_path / "d" / "index.html").read_text() == built
    # a port out of range, a host that does not resolve: named, not a traceback
    assert main(["dashboard", "serve", "--site", str(tmp_path / "d"), "--port", "70000"]) == 2
    assert "--port: expected a TCP port from 1 to 65535, got 70000" in capsys.readouterr().err
    assert main(["dashboard", "serve", "--site", str(tmp_path / "d"), "--host", "no.such.host.invalid"]) == 2
    assert (
        "--host/--port: expected an address to serve on here, got no.such.host.invalid:8000" in capsys.readouterr().err
    )
