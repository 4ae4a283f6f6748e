"""Tuning done right: failures are data, defaults go first, killed runs resume, workers share storage."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import optuna
import pytest
import torch
from optuna.storages.journal import JournalFileBackend

import tuner.freeze
from kernels import backends, frozen, timing
from kernels.modes import Op, Reduction
from kernels.tiling import Space
from tests.helpers import spinning_on
from tuner import study as st
from tuner.cli import main
from tuner.freeze import freeze, write_atomic
from tuner.problems import Case

ROOT = Path(__file__).resolve().parents[2]
CASE = Case(Op.L1, torch.float32, (1 << 12,), Reduction.NONE)
FAST = st.TuneOptions(min_time_s=0.002, rounds=2)


def _tune_argv(storage: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "tuner",
        "tune",
        "--op",
        "l1",
        "--shape",
        "2^12",
        "--storage",
        storage,
        "--min-time",
        "0.02",
        "--no-progress",
        *extra,
    ]


def test_default_is_the_first_trial_and_failures_never_win(storage: str) -> None:
    result = st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=6))
    study = optuna.load_study(study_name=result.name, storage=st.open_storage(storage))
    first = study.trials[0]
    assert first.user_attrs["config"]["tile"] == 4096 and first.user_attrs["config"]["cores"] == 1  # the default
    assert result.final["config"]["variant"] in ("flat", "strided")
    assert study.user_attrs["final"]["kernel_hash"] and study.user_attrs["space_hash"]
    # the decision's rounds, each the best candidate's median over the default's, as decide saw them
    final = study.user_attrs["final"]
    # and the control's, the default's config timed again in the same rounds
    assert len(final["round_ratios"]) == 2 and all(r > 0 for r in final["round_ratios"])
    assert len(final["control_ratios"]) == 2 and all(r > 0 for r in final["control_ratios"])
    # and the baseline's own round medians, in seconds: its rounds' speed, which the ratios cancel
    assert len(final["baseline_rounds_s"]) == 2 and min(final["baseline_rounds_s"]) > 0
    assert final["confirm_baseline_rounds_s"] is None  # nothing was timed again (below)
    verdict = st.decide([1.0, 1.0], final["round_ratios"], final["control_ratios"])
    assert verdict.kept == final["switched"] and verdict.noise == pytest.approx(final["noise"])
    # two rounds never rank below the control at ALPHA (1/6 at best), so nothing was timed again
    assert not verdict.kept and final["confirmed"] is None and final["confirm_ratios"] is None
    # the chance is the gate's reading of a winner other than the baseline; none where the default won
    baseline_won = not final["switched"] and final["best_candidate"] == final["config"]
    assert final["chance"] == (None if baseline_won else st.chance(final["round_ratios"], final["control_ratios"]))


def test_a_tune_holds_the_tables_exact_entry_to_the_gate_it_holds_a_challenger_to(
    storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The table in tmp_path gives CASE an exact entry that is not the default: the incumbent. The
    # finalists measure it beside the default, and what the study records (and --freeze writes) is
    # the incumbent unless the fastest beat it past the gate (its rounds against the control's).
    ex = st._Bench.make(CASE, "cpu").executor(None)
    space, key = ex.space, ex.key
    incumbent = next(c for c in space if c != space.default and c.cores == space.default.cores)
    entry = {
        "op": key.op.value,
        "dtype": key.dtype,
        "bucket": key.bucket,
        "grad_kind": key.grad_kind.value,
        "layout": key.layout.value,
        "reduction_kind": key.reduction_kind,
        "config": incumbent.to_dict(),
        "space_hash": space.hash,
        "kernel_hash": frozen.kernel_hash("cpu", key.op.value),
    }
    table = {"schema_version": frozen.SCHEMA_VERSION, "entries": [entry], "common": {}}
    write_atomic(frozen.config_path("cpu", backends.get("cpu").facts().name, tmp_path), table)
    try:
        with monkeypatch.context() as m:
            m.setattr(frozen, "CONFIG_DIR", tmp_path)
            frozen.reset()
            assert frozen.is_exact(st._Bench.make(CASE, "cpu").executor(None).config_source)
            result = st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=3, trials=4))
    finally:
        frozen.reset()
    final = result.final
    assert final["baseline"] == "incumbent" and final["incumbent"] == incumbent.to_dict()
    # "incumbent" above says it was a trial of the sweep (enqueued from the table); what was chosen
    # may still be the default (trial -1), where the default beat it past the gate: on CI's busy
    # host the default once did, in all 3 rounds against the control (a chance of 1/20)
    assert (final["trial"] == -1) == (final["config"] == space.default.to_dict())
    # the rounds, the winner's and the control's (the incumbent's config again), are over the incumbent's
    kept = st.decide([1.0] * 3, final["round_ratios"], final["control_ratios"]).kept
    # a winner the first rounds kept was timed again, and stands only if the fresh rounds keep it
    assert (final["confirmed"] is None) == (not kept)
    if kept:
        again = st.decide([1.0] * 3, final["confirm_ratios"], final["confirm_control_ratios"]).kept
        assert final["confirmed"] == again and len(final["confirm_ratios"]) == 3
        assert len(final["confirm_baseline_rounds_s"]) == 3
        assert final["confirm_chance"] == st.chance(final["confirm_ratios"], final["confirm_control_ratios"])
    switched = kept and bool(final["confirmed"])
    assert final["switched"] == switched
    assert final["config"] == (final["best_candidate"] if switched else incumbent.to_dict())
    assert final["tuned"] == (final["config"] != space.default.to_dict())
    # --freeze writes the decision, and marks an incumbent held without a win in this run
    path, _ = freeze(storage, "cpu", root=tmp_path / "out")
    (written,) = json.loads(path.read_text())["entries"]
    assert written["config"] == final["config"] and written.get("held", False) == (not final["switched"])


@pytest.mark.parametrize("grain", [timing.Grain.LAUNCH, timing.Grain.RUN])
def test_launch_by_launch_a_copy_runs_between_the_launches_stand_in_copy(
    storage: str, monkeypatch: pytest.MonkeyPatch, grain: timing.Grain
) -> None:
    """Plumbing, with a stand-in for the copy that counts its runs: launch by launch, every sweep
    trial and the finalists' rounds run the size-matched copy between the kernel's launches (the
    regime bench --report's roofline rows time); run by run, never."""
    sizes: list[int] = []
    ran = [0]

    def stand_in(device: str, nbytes_moved: int) -> tuple[object, int]:
        sizes.append(nbytes_moved)

        def run(_: int) -> None:
            ran[0] += 1

        return run, nbytes_moved

    monkeypatch.setattr(st.timing, "copy_probe", stand_in)
    swept = []  # the copy's runs when the sweep ended and the finalists' rounds began
    finalists = st._finalists
    monkeypatch.setattr(st, "_finalists", lambda *a, **k: (swept.append(ran[0]), finalists(*a, **k))[1])
    opts = st.TuneOptions(storage=storage, min_time_s=0.002, rounds=3, trials=3, grain=grain)
    result = st.tune_case(CASE, opts)
    assert result.final["copy_between"] == (grain is timing.Grain.LAUNCH)
    if grain is timing.Grain.RUN:
        assert ran == [0] and sizes == []
        return
    assert sizes == [CASE.numel * 4 * 4]  # one copy, built once, for l1's traffic: a full g, x and t read, out written
    study = optuna.load_study(study_name=result.name, storage=st.open_storage(storage))
    trials = [t for t in study.trials if t.state is optuna.trial.TrialState.COMPLETE]
    launches = sum(t.user_attrs["timing"]["n"] for t in trials)
    # a copy for each timed launch of a trial (interleaved's warm-ups add theirs), then more in the rounds
    assert ran[0] > swept[0] >= launches >= timing.MIN_RUNS * len(trials)


def test_freeze_writes_the_commit_a_decision_was_measured_at(
    storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision records its commit and packages; freeze writes those, not its own (which once
    rewrote every entry of a table at each freeze). A study decided before decisions recorded them
    gets the freeze's own the first time it is frozen, and keeps it."""
    result = st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=2))
    assert result.final["versions"] == st.versions()
    if st.git_commit() == "unknown":
        pytest.skip("not a git checkout: decisions record no commit")
    assert result.final["git_commit"] == st.git_commit()
    monkeypatch.setattr(tuner.freeze, "git_commit", lambda: "f" * 40)  # a later commit, at freeze time
    path, _ = freeze(storage, "cpu", root=tmp_path / "a")
    (written,) = json.loads(path.read_text())["entries"]
    assert written["git_commit"] == result.final["git_commit"] != "f" * 40
    assert written["versions"] == result.final["versions"]
    study = optuna.load_study(study_name=result.name, storage=st.open_storage(storage))
    older = {k: v for k, v in study.user_attrs["final"].items() if k not in ("git_commit", "versions")}
    study.set_user_attr("final", older)
    path, _ = freeze(storage, "cpu", root=tmp_path / "b")
    (written,) = json.loads(path.read_text())["entries"]
    assert written["git_commit"] == "f" * 40
    # frozen again later, that decision keeps the commit of the freeze that first wrote it
    monkeypatch.setattr(tuner.freeze, "git_commit", lambda: "e" * 40)
    path, _ = freeze(storage, "cpu", root=tmp_path / "b")
    (written,) = json.loads(path.read_text())["entries"]
    assert written["git_commit"] == "f" * 40


def test_settle_keeps_the_incumbent_when_the_rounds_disagree() -> None:
    # each row a contender's round medians: the default, the incumbent, a challenger
    rounds = [[8.0, 12.0, 8.0, 8.0, 8.0], [9.0] * 5, [10.0] * 5]  # round 2 hit the default
    control = [9.5, 8.5, 9.2, 8.8, 9.0]  # the incumbent again: 0.94-1.06 of itself
    held = st.settle([sorted(r)[2] for r in rounds], rounds, baseline=1, control=control)
    # the default's 0.89 is below all 5 control rounds in four rounds; its 1.33 above all 5: U = 5
    assert held.winner == 0 and held.chosen == 1 and not held.switched
    assert held.ratios == pytest.approx([8 / 9, 12 / 9, 8 / 9, 8 / 9, 8 / 9])
    assert held.control == pytest.approx([c / 9 for c in control]) and held.chance == pytest.approx(19 / 252)
    rounds = [[10.0] * 5, [8.0, 12.0, 8.0, 8.0, 8.0], [9.0] * 5]  # the incumbent is fastest
    held = st.settle([sorted(r)[2] for r in rounds], rounds, baseline=1, control=rounds[1])
    assert held.winner == 1 and held.chosen == 1 and not held.switched and held.chance is None


def test_settle_replaces_the_incumbent_only_with_a_win_past_the_control() -> None:
    default, incumbent = [10.0, 10.2, 9.9, 10.1, 10.0], [11.0, 11.5, 10.8, 11.2, 11.1]
    control = [11.1, 11.4, 10.7, 11.3, 11.0]
    challenger = [8.0, 8.1, 7.9, 8.2, 8.0]  # ~27% every round
    settled = st.settle([10.0, 11.1, 8.0], [default, incumbent, challenger], baseline=1, control=control)
    assert settled.chosen == 2 and settled.switched and settled.chance == pytest.approx(1 / 252)
    slower = [12.0] * 5  # the default beats its incumbent, by ~10% in every round
    settled = st.settle([10.0, 11.1, 12.0], [default, incumbent, slower], baseline=1, control=control)
    assert settled.chosen == 0 and settled.switched
    # no incumbent: a 5.5% median gain whose rounds mingle with the control's is not kept
    default, control = [10.0] * 5, [9.2, 10.8, 9.6, 10.4, 10.0]
    settled = st.settle([10.0, 9.45], [default, [9.0, 9.9, 9.45, 9.3, 9.6]], baseline=0, control=control)
    assert settled.chosen == 0 and settled.winner == 1 and not settled.switched


def test_confirm_keeps_a_winner_only_if_fresh_rounds_keep_it_too() -> None:
    default, incumbent, control = (
        [10.0, 10.2, 9.9, 10.1, 10.0],
        [11.0, 11.5, 10.8, 11.2, 11.1],
        [11.1, 11.4, 10.7, 11.3, 11.0],
    )
    challenger = [8.0, 8.1, 7.9, 8.2, 8.0]
    settled = st.settle([10.0, 11.1, 8.0], [default, incumbent, challenger], baseline=1, control=control)
    assert settled.switched and settled.chosen == 2
    # fresh rounds (baseline, winner, control) in which the winner is ~27% faster again: it stands
    fresh = [[11.0, 11.2, 10.9, 11.1, 11.0], [8.1, 8.0, 8.2, 7.9, 8.0], [11.1, 10.9, 11.2, 11.0, 10.8]]
    stood, record = st.confirm(settled, 1, fresh)
    assert stood == settled and record.kept and record.chance == pytest.approx(1 / 252)
    assert record.ratios == pytest.approx([w / b for w, b in zip(fresh[1], fresh[0], strict=True)])
    assert record.control == pytest.approx([c / b for c, b in zip(fresh[2], fresh[0], strict=True)])
    # fresh rounds in which it mingles with the control (the pick was the luckiest draw): the baseline stays
    fresh = [[11.0] * 5, [10.6, 11.3, 10.9, 11.4, 10.7], [10.8, 11.2, 11.0, 10.9, 11.3]]
    held, record = st.confirm(settled, 1, fresh)
    assert not record.kept and held.chosen == 1 and not held.switched
    # what the first rounds saw is kept beside it (the winner, its ratios, the chance)
    assert held.winner == settled.winner and held.ratios == settled.ratios and held.chance == settled.chance


def test_space_seeds_run_right_after_the_default_plumbing_cpu_space_given_seeds(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plumbing: the CPU space has no seeds, so the test hands it two (CUDA's cannot run here); a
    short study must measure them before its sampler draws anything, skipping one outside the space."""
    import dataclasses

    from kernels import backends, dispatch
    from kernels.tiling import Tiling

    cpu = backends.get("cpu")
    real_space = cpu.space
    outside = Tiling(tile=3, cores=1)

    def seeded(formula, geometry, dtype):  # type: ignore[no-untyped-def]
        space = real_space(formula, geometry, dtype)
        seeds = (dataclasses.replace(space.default, tile=1024), outside, dataclasses.replace(space.default, tile=256))
        return dataclasses.replace(space, seeds=seeds)

    monkeypatch.setattr(cpu, "space", seeded)
    dispatch.clear_plans()  # a plan cached by an earlier test holds the unseeded space
    opts = st.TuneOptions(storage=storage, sampler="random", min_time_s=0.002, rounds=2, trials=4)  # not a grid
    try:
        base = st._Bench.make(CASE, "cpu").executor(None)
        result = st.tune_case(CASE, opts)
    finally:
        dispatch.clear_plans()  # nor may a later test find the seeded one
    # The default, this host's frozen config where its table has one, then the seeds in the space
    # that are neither (a frozen config may be a seed: measured once).
    start = [base.space.default] + ([base.config] if base.config_source.startswith("frozen") else [])
    expected = list(dict.fromkeys([*start, *(c for c in base.space.seeds if c in base.space)]))
    assert [c.tile for c in base.space.seeds] == [1024, 3, 256] and outside not in base.space
    study = optuna.load_study(study_name=result.name, storage=st.open_storage(storage))
    enqueued = [t for t in study.trials if "fixed_params" in t.system_attrs]
    assert [t.user_attrs["config"] for t in enqueued] == [c.to_dict() for c in expected]
    assert study.trials[: len(enqueued)] == enqueued  # before any draw of the sampler


def _param(value: object) -> object:
    return getattr(value, "value", value)  # optuna stores an enum knob by its value


def test_wrong_values_are_recorded_as_incorrect_and_the_study_goes_on(storage: str) -> None:
    """Plumbing with a corrupted reference standing in for a wrong kernel: every trial must fail the check."""
    bench = st._Bench.make(CASE, "cpu")
    bench.ref = bench.ref + 1.0
    space = bench.executor(None).space
    study = optuna.create_study(storage=st.open_storage(storage), sampler=optuna.samplers.RandomSampler(seed=0))
    for config in space.sample(3, seed=0):  # members of the space, so each one runs and is checked
        study.enqueue_trial({name: _param(getattr(config, name)) for name, _ in space.knobs})
    study.optimize(st._objective(bench, st.Sweep(space, "k"), FAST), n_trials=3, catch=(st.TrialFailure,))
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * 3
    assert {t.user_attrs["failure"] for t in study.trials} == {"incorrect"}
    assert "elements off" in study.trials[0].user_attrs["reason"]


def test_a_check_of_a_passed_outputs_bits_skips_the_reference_and_any_other_output_is_checked_in_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real loops: after one config's out meets the bar, another config's out of the same bits (the
    loops' bits do not depend on the config) passes without the reference check. Plumbing, with a
    wrapped dispatch.run standing in for a broken config: an out one element off, or with one
    element left unwritten, after a passed one is checked in full and fails."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    configs = [bench.executor(None).config, *space.sample(2, seed=1)]
    assert len({c.to_dict().__repr__() for c in configs}) == 3
    calls: list[int] = []
    full = type(CASE).mismatch

    def counted(self: Case, *args: torch.Tensor) -> str | None:
        calls.append(1)
        return full(self, *args)

    monkeypatch.setattr(type(CASE), "mismatch", counted)
    assert bench.check(bench.executor(configs[0])) is None and len(calls) == 1
    first = bench.passed
    assert first is not None and first[0].data_ptr() != bench.out.data_ptr()
    for config in configs[1:]:
        assert bench.check(bench.executor(config)) is None
    assert len(calls) == 1 and bench.passed is first  # the same bits: compared, not checked

    real = st.dispatch.run

    def off_by_one_element(ex: object) -> None:
        real(ex)
        bench.out[100] += 1.0

    def one_element_unwritten(ex: object) -> None:
        real(ex)
        bench.out[7] = float("nan")  # as the check's NaN fill leaves it

    monkeypatch.setattr(st.dispatch, "run", off_by_one_element)
    assert "1 of 4096 elements off" in (bench.check(bench.executor(configs[1])) or "")
    monkeypatch.setattr(st.dispatch, "run", one_element_unwritten)
    assert (bench.check(bench.executor(configs[2])) or "").startswith("NaN mismatch at [[7]]")
    assert len(calls) == 3 and bench.passed is first  # a failed check replaces nothing

    monkeypatch.setattr(st.dispatch, "run", real)
    bench.ref = bench.ref + 1.0  # another reference: the passed bits met the bar against the old one
    assert "elements off" in (bench.check(bench.executor(configs[0])) or "")
    assert len(calls) == 4 and bench.passed is first


def test_a_failed_first_check_keeps_no_bits_to_compare_with() -> None:
    """Plumbing with a corrupted reference standing in for a wrong kernel: nothing passed, so every
    check after it runs in full and fails as the first did."""
    bench = st._Bench.make(CASE, "cpu")
    bench.ref = bench.ref + 1.0
    ex = bench.executor(None)
    assert bench.check(ex) and bench.passed is None
    assert bench.check(ex) and bench.passed is None


def test_same_bits_tells_nan_patterns_and_signed_zeros_apart() -> None:
    a = torch.tensor([0.0, float("nan"), 1.5], dtype=torch.bfloat16)
    assert st._same_bits(a, a.clone())  # NaN == NaN of one pattern, where torch.equal says no
    assert not torch.equal(a, a.clone())
    c = a.clone()
    c.view(torch.int16)[1] |= 1  # another NaN pattern
    assert torch.isnan(c[1]) and not st._same_bits(a, c)
    b = a.clone()
    b[0] = -0.0
    assert not st._same_bits(a, b)  # where torch.equal says yes
    assert torch.equal(a[[0, 2]], b[[0, 2]])
    assert not st._same_bits(a, a.float())  # another dtype
    assert not st._same_bits(a, a[:2])  # another shape
    t = torch.arange(12.0).reshape(3, 4).t()  # strides of a view: its elements, in its order
    assert st._same_bits(t, t.contiguous())
    u = t.contiguous()
    u[3, 2] = 12.0
    assert not st._same_bits(t, u)


def _study_names(store: optuna.storages.BaseStorage) -> set[str]:
    return {s.study_name for s in optuna.get_all_study_summaries(store, include_best_trial=False)}


def test_within_shared_journals_a_journal_is_opened_once_and_still_reads_what_others_append(storage: str) -> None:
    """One storage object per journal file within shared_journals() (its opening replays the whole
    log); a second, independent storage of the file (another process's, as optuna's lock lets it)
    appends a study, which the held one reads. Outside it, and after it, each call opens anew."""
    assert st.open_storage(storage) is not st.open_storage(storage)
    with st.shared_journals():
        store = st.open_storage(storage)
        optuna.create_study(study_name="mine", storage=store)
        assert st.open_storage(storage) is store
        assert st.open_storage("journal:" + storage) is store  # one file, however it is named
        assert st.open_storage(os.path.relpath(storage)) is store
        with st.shared_journals():
            assert st.open_storage(storage) is store  # nested: the outer one's holds
        assert st.open_storage(storage) is store
        other = optuna.storages.JournalStorage(JournalFileBackend(storage))
        optuna.create_study(study_name="theirs", storage=other)
        assert st.open_storage(storage) is store and _study_names(store) == {"mine", "theirs"}
    assert st.open_storage(storage) is not store


def test_a_journal_named_by_a_relative_path_stays_that_file_after_a_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The storage holds the resolved path, so a study created after the process changed its
    directory lands in the file it was opened on, shared or not."""
    first, then = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    then.mkdir()
    monkeypatch.chdir(first)
    fresh_one = st.open_storage("k.log")
    with st.shared_journals():
        shared = st.open_storage("j.log")
    monkeypatch.chdir(then)
    optuna.create_study(study_name="s", storage=shared)
    optuna.create_study(study_name="f", storage=fresh_one)
    assert (first / "j.log").stat().st_size > 0 and (first / "k.log").stat().st_size > 0
    assert not (then / "j.log").exists() and not (then / "k.log").exists()


def test_constraint_breaking_config_is_recorded_not_run(storage: str) -> None:
    """The Triton space's warps_fit_block constraint, checked before anything is compiled."""
    from kernels import backends

    if not backends.probe("triton-interpret")[0]:
        pytest.skip("triton not installed")
    bench = st._Bench.make(CASE, "triton-interpret")
    space = bench.executor(None).space
    study = optuna.create_study(storage=st.open_storage(storage))
    study.enqueue_trial({"variant": "flat", "tile": 256, "cores": 1, "num_warps": 16})
    study.optimize(st._objective(bench, st.Sweep(space, "k"), FAST), n_trials=1, catch=(st.TrialFailure,))
    trial = study.trials[0]
    assert trial.state == optuna.trial.TrialState.FAIL and trial.user_attrs["failure"] == "constraint"
    assert "warps_fit_block" in trial.user_attrs["reason"]


def test_draws_that_break_a_constraint_do_not_spend_the_budget(storage: str) -> None:
    # Random draws each knob on its own; on the CPU space prefetch with the strided variant breaks
    # prefetch_contiguous, and seed 0 draws such points.
    result = st.tune_case(CASE, st.TuneOptions(storage=storage, sampler="random", trials=6, min_time_s=0.002, rounds=2))
    study = optuna.load_study(study_name=result.name, storage=st.open_storage(storage))
    trials = study.get_trials(deepcopy=False)
    broken = [t for t in trials if t.user_attrs.get("failure") == "constraint"]
    assert broken, "seed 0 drew no constraint-breaking point: the test no longer exercises the budget rule"
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials) == 6
    assert len(trials) == 6 + len(broken)


def test_a_study_resumed_under_a_grown_space_sweeps_the_new_space(storage: str) -> None:
    """Trials of the study's earlier space (here: one without the stream knob), four run and one
    enqueued, as a new knob leaves them: they keep their values, spend none of the new sweep's
    budget, never stand as finalists (their impossible times would win) and the enqueued one is
    never run with its missing knob drawn at random."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(CASE, bench, "cpu"), storage=st.open_storage(storage))
    old = {name: values for name, values in st._choices(space).items() if name != "stream"}
    points: list[dict[str, object]] = []
    for config in space:
        params = {k: v for k, v in st._params(space, config).items() if k in old}
        if params not in points:
            points.append(params)
    dists = {name: optuna.distributions.CategoricalDistribution(values) for name, values in old.items()}
    for i, params in enumerate(points[:4]):
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=1e-9 * (i + 1)))
    study.enqueue_trial(points[4])

    result = st.tune_case(CASE, st.TuneOptions(storage=storage, sampler="grid", trials=6, min_time_s=0.002, rounds=2))

    trials = study.get_trials(deepcopy=False)
    assert [t.value for t in trials[:4]] == [1e-9 * (i + 1) for i in range(4)]
    assert trials[4].state == optuna.trial.TrialState.FAIL and trials[4].user_attrs["failure"] == "superseded"
    new = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE and t.number > 4]
    assert len(new) == 6 and all(t.user_attrs["space_hash"] == space.hash for t in new)
    assert all(set(t.params) == set(st._choices(space)) for t in new)
    assert len({tuple(sorted(t.params.items())) for t in new}) == 6
    assert result.final["trial"] not in range(5) and result.final["median_s"] > 1e-6


def _old_kernel_trials(study: optuna.Study, space: Space, kernel: str | None, n: int) -> None:
    """``n`` completed points of ``space`` at impossible 1 ns times, measured (say) on ``kernel``
    (None: before trials carried their kernel's hash)."""
    dists = {name: optuna.distributions.CategoricalDistribution(values) for name, values in st._choices(space).items()}
    tags = {"space_hash": space.hash} | ({"kernel_hash": kernel} if kernel else {})
    for i, config in enumerate(space.sample(n, seed=2)):
        params = st._params(space, config)
        trial = optuna.trial.create_trial(params=params, distributions=dists, value=1e-9 * (i + 1), user_attrs=tags)
        study.add_trial(trial)


def _final_on(kernel: str) -> dict[str, object]:
    return {"config": {"tile": 4096}, "kernel_hash": kernel, "tuned": False, "median_s": 1e-9}


@pytest.mark.parametrize("tagged", [True, False], ids=["tagged", "untagged"])
def test_a_study_resumed_after_a_kernel_edit_sweeps_its_grid_again(
    storage: str, tagged: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Trials measured on loops since edited (tagged with their kernel's hash, or from before the
    tag, beside a decision made on that kernel): they stay as history, spend none of the new sweep's
    budget and never stand as finalists, so the grid is run again on today's loops."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(CASE, bench, "cpu"), storage=st.open_storage(storage))
    _old_kernel_trials(study, space, "0" * 16 if tagged else None, 4)
    study.set_user_attr("final", _final_on("0" * 16))

    result = st.tune_case(CASE, st.TuneOptions(storage=storage, sampler="grid", trials=4, min_time_s=0.002, rounds=2))

    trials = study.get_trials(deepcopy=False)
    today = frozen.kernel_hash("cpu", CASE.op.value)
    new = [t for t in trials[4:] if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(new) == 4 and all(t.user_attrs["kernel_hash"] == today for t in new)
    assert result.final["trial"] not in range(4) and result.final["median_s"] > 1e-6
    assert result.final["kernel_hash"] == today and "same_kernels" not in result.final
    assert "4 trials of earlier sweeps (other loops or timing, or --resweep) kept as history" in caplog.text  # told why
    # and a later resume, its decision now on today's kernel, does not take the old trials back
    again = st.tune_case(CASE, st.TuneOptions(storage=storage, sampler="grid", trials=4, min_time_s=0.002, rounds=2))
    assert len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))) == 8
    assert again.final["median_s"] > 1e-6
    sweep = st.Sweep.of(study, space, "cpu", CASE.op.value)
    assert not any(sweep.holds(t) for t in trials[:4]) and all(sweep.holds(t) for t in new)


def _host_apart() -> str:
    """LOSSTUNE_CPU_APART set to the host's own pick: a switch set, the loops this process runs kept."""
    from kernels.backends import cpu

    return "LOSSTUNE_CPU_APART=" + ("1" if cpu.BACKEND.picks()["APART"] == "on" else "0")


def test_trials_timed_under_other_cpu_loop_switches_are_history(
    storage: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Trials another process timed with CPU loop switches set (their ``cpu_forced``) ran other
    loops: a sweep with none set runs the grid again and never takes them as finalists, and its
    decision records that none was set. A sweep with one set, the other way round: the trials from
    before the tag (none set) are not its. Set or not, the process here runs the same loops (the
    switch says the host's own pick), so every decision measures real runs."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(CASE, bench, "cpu"), storage=st.open_storage(storage))
    today = frozen.kernel_hash("cpu", CASE.op.value)
    dists = {name: optuna.distributions.CategoricalDistribution(v) for name, v in st._choices(space).items()}
    tags = {"space_hash": space.hash, "kernel_hash": today, "timed": "run", "cpu_forced": "LOSSTUNE_CPU_FUSED=1"}
    for i, config in enumerate(space.sample(3, seed=2)):  # impossible 1 ns times, under a switch
        params = st._params(space, config)
        study.add_trial(
            optuna.trial.create_trial(params=params, distributions=dists, value=1e-9 * (i + 1), user_attrs=tags)
        )
    opts = st.TuneOptions(storage=storage, sampler="grid", trials=3, min_time_s=0.002, rounds=2)

    result = st.tune_case(CASE, opts)

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    old, new = complete[:3], complete[3:]
    assert len(new) == 3 and all(t.user_attrs["cpu_forced"] == "" for t in new)
    assert result.final["trial"] not in range(3) and result.final["median_s"] > 1e-6
    assert result.final["cpu_forced"] == ""
    assert "3 trials of earlier sweeps (other loops or timing, or --resweep)" in caplog.text
    sweep = st.Sweep.of(study, space, "cpu", CASE.op.value)
    assert not any(sweep.holds(t) for t in old) and all(sweep.holds(t) for t in new)

    name, value = _host_apart().split("=")
    monkeypatch.setenv(name, value)
    forced = st.Sweep.of(study, space, "cpu", CASE.op.value)
    assert forced.forced == _host_apart() and forced.tags()["cpu_forced"] == _host_apart()
    assert not any(forced.holds(t) for t in complete)
    again = st.tune_case(CASE, opts)
    assert again.final["cpu_forced"] == _host_apart() and again.final["trial"] not in range(6)
    assert st.forced_tag("cuda") == ""  # no switch changes the Triton kernels


@pytest.mark.parametrize("between", [False, True], ids=["decided-timed-alone", "decided-between-copies"])
def test_trials_timed_on_another_clock_are_history(
    storage: str, between: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Trials from before the timing tag were timed as the study's decision says: run by run before
    bd45c9b, between copies after it (copy_between). A launch-by-launch sweep, which runs the copy
    between launches, sets the first kind aside (picked in another regime: section 108) and counts
    the second; a run-by-run sweep the other way round. The first sweep records how they were timed,
    so its own decision does not change it. A failed trial failed on its kernel, on any clock."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(CASE, bench, "cpu"), storage=st.open_storage(storage))
    today = frozen.kernel_hash("cpu", CASE.op.value)
    _old_kernel_trials(study, space, today, 3)  # today's loops, no timing tag, impossible times
    study.set_user_attr("final", _final_on(today) | {"copy_between": between, "grain": "launch"})
    launch = timing.Grain.LAUNCH
    opts = st.TuneOptions(storage=storage, sampler="grid", trials=3, min_time_s=0.002, rounds=2, grain=launch)

    result = st.tune_case(CASE, opts)

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    old = complete[:3]
    assert study.user_attrs["untagged_timed"] == ("launch+copy" if between else "run")
    run = st.Sweep.of(study, space, "cpu", CASE.op.value, st.Timed.RUN)
    if between:
        assert len(complete) == 3 and result.final["trial"] in (-1, 0, 1, 2)  # nothing measured again
        assert not any(run.holds(t) for t in old)  # run by run, they are of another clock
        return
    new = complete[3:]
    assert len(new) == 3 and all(t.user_attrs["timed"] == "launch+copy" for t in new)
    assert result.final["trial"] not in range(3) and result.final["copy_between"]
    assert "3 trials of earlier sweeps (other loops or timing, or --resweep)" in caplog.text
    # resumed, its decision now recording copy_between, it does not take the old trials back
    st.tune_case(CASE, opts)
    sweep = st.Sweep.of(study, space, "cpu", CASE.op.value, st.Timed.LAUNCH_COPY)
    assert not any(sweep.holds(t) for t in old) and all(sweep.holds(t) for t in new)
    assert len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))) == 6
    # run by run, the untagged trials are of its clock, and the launch-by-launch ones are not
    assert all(run.holds(t) for t in old) and not any(run.holds(t) for t in new)
    # a point that failed its check, timed run by run, stays failed for the launch-by-launch sweep
    dists = {name: optuna.distributions.CategoricalDistribution(v) for name, v in st._choices(space).items()}
    failed = optuna.trial.create_trial(
        params=st._params(space, space.default),
        distributions=dists,
        state=optuna.trial.TrialState.FAIL,
        user_attrs={"space_hash": space.hash, "kernel_hash": today, "timed": "run", "failure": "incorrect"},
    )
    study.add_trial(failed)
    assert sweep.holds(study.get_trials(deepcopy=False)[-1])


def test_trials_of_a_kernel_restamp_carried_the_decision_across_still_count(storage: str) -> None:
    """restamp found the decision's config compiling as before, so the study's final holds today's
    hash and the chain it crossed: its trials are the sweep's, a resume measures nothing new, picks
    its finalists from them, and the new decision keeps the chain."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(CASE, bench, "cpu"), storage=st.open_storage(storage))
    _old_kernel_trials(study, space, "1" * 16, 3)
    today = frozen.kernel_hash("cpu", CASE.op.value)
    carried = st.restamped_final(st.restamped_final(_final_on("1" * 16), "2" * 16), today)
    assert carried["kernel_hash"] == today and carried["same_kernels"] == ["1" * 16, "2" * 16]
    study.set_user_attr("final", carried)

    result = st.tune_case(CASE, st.TuneOptions(storage=storage, sampler="grid", trials=3, min_time_s=0.002, rounds=2))

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    assert len(complete) == 3  # nothing measured again (the rest of the grid waits in the queue)
    assert result.final["trial"] in (-1, 0, 1, 2)  # the default, or one of the carried trials
    assert result.final["same_kernels"] == ["1" * 16, "2" * 16]


def test_resweep_sweeps_again_and_later_resumes_keep_its_boundary(storage: str) -> None:
    """``tune --resweep`` (for an edit neither hash sees, such as cpu.py's gates): the study's trials
    so far are history, the budget is measured again, and a plain resume afterwards counts only the
    new sweep's trials (it measures nothing more)."""
    argv = ["tune", "--op", "l1", "--shape", "2^12", "--storage", storage, "--min-time", "0.002"]
    argv += ["--sampler", "grid", "--trials", "3", "--no-progress", "--json"]
    assert main(argv) == 0
    (summary,) = optuna.get_all_study_summaries(st.open_storage(storage))
    study = optuna.load_study(study_name=summary.study_name, storage=st.open_storage(storage))
    space = st._Bench.make(CASE, "cpu").executor(None).space
    _old_kernel_trials(study, space, frozen.kernel_hash("cpu", "l1"), 1)  # today's loops, an impossible time
    assert main([*argv, "--resweep"]) == 0
    assert main(argv) == 0

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    first = study.user_attrs["sweep_from"]
    assert len(complete) == 7 and sum(t.number >= first for t in complete) == 3
    assert study.user_attrs["final"]["median_s"] > 1e-6  # the 1 ns trial stood as no finalist
    assert study.user_attrs["final"]["trial"] in (-1, *(t.number for t in complete if t.number >= first))
    # and the dashboard's figures take the new sweep's trials alone as the study's current ones
    from dashboards import loaders

    rows = loaders.load_tuning(storage)
    done = rows[rows["state"] == "COMPLETE"]
    assert sorted(done[done["current"]]["trial"]) == sorted(t.number for t in complete if t.number >= first)


def test_a_queue_that_holds_a_point_twice_runs_it_once(storage: str) -> None:
    """Queues as tuners before trials carried their space's hash left them: a point measured and
    enqueued again, another enqueued twice. Each is superseded, and a grid's budget counts points."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(CASE, bench, "cpu"), storage=st.open_storage(storage))
    measured, queued = (st._params(space, c) for c in space.sample(2, seed=1))
    dists = {name: optuna.distributions.CategoricalDistribution(values) for name, values in st._choices(space).items()}
    study.add_trial(optuna.trial.create_trial(params=measured, distributions=dists, value=1.0))
    for params in (measured, queued, queued):
        study.enqueue_trial(params)

    st.tune_case(CASE, st.TuneOptions(storage=storage, sampler="grid", trials=4, min_time_s=0.002, rounds=2))

    trials = study.get_trials(deepcopy=False)
    assert [t.user_attrs.get("failure") for t in trials[1:4]] == ["superseded", None, "superseded"]
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == len({tuple(sorted(t.params.items())) for t in complete}) == 4


def _complete(storage: str) -> list[optuna.trial.FrozenTrial]:
    studies = optuna.get_all_study_summaries(st.open_storage(storage))
    if not studies:
        return []
    study = optuna.load_study(study_name=studies[0].study_name, storage=st.open_storage(storage))
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))


def test_killed_run_resumes_without_losing_or_remeasuring(storage: str) -> None:
    proc = subprocess.Popen(
        _tune_argv(storage, "--sampler", "grid"), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.time() + 120
    while len(_complete(storage)) < 4 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {t.number: (t.params, t.value) for t in _complete(storage)}
    assert len(before) >= 4
    subprocess.run(_tune_argv(storage, "--sampler", "grid"), cwd=ROOT, check=True, capture_output=True)
    after = _complete(storage)
    for t in after:  # every finished trial is still there, with its value, never measured again
        if t.number in before:
            assert (t.params, t.value) == before[t.number]
    params = [tuple(sorted(t.params.items())) for t in after]
    assert len(params) == len(set(params))  # no point measured twice
    # The point that was running at the kill may be lost (known gap, noted on issue 3); none that finished is.
    assert len(params) >= 19


def _two_workers(storage: str) -> None:
    argv = _tune_argv(storage, "--sampler", "random", "--trials", "8", "--study-name", "shared")
    st.open_storage(storage)  # create the schema once: two processes racing to create tables collide in PostgreSQL
    procs = [
        subprocess.Popen([*argv, "--seed", str(i)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for i in range(2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-2000:]
    study = optuna.load_study(study_name="shared", storage=st.open_storage(storage))
    trials = study.get_trials(deepcopy=False)
    assert all(t.state.is_finished() for t in trials)
    failed = [
        (t.number, t.user_attrs.get("failure"), t.user_attrs.get("reason"))
        for t in trials
        if t.user_attrs.get("failure")
    ]
    assert not [f for f in failed if f[1] != "constraint"], failed  # l1 float32 at 2^12 runs every valid point
    complete = sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    # One budget for the study: the second worker stops when it is spent, overrunning by at most the
    # trial it had in flight.
    assert 8 <= complete <= 9, failed
    assert "final" in study.user_attrs


def test_two_workers_share_the_embedded_journal(storage: str) -> None:
    _two_workers(storage)


def test_two_workers_share_a_postgresql_study() -> None:
    url_file = ROOT / ".ci" / "postgres.url"
    if not url_file.exists():
        if os.environ.get("CI"):
            pytest.fail(".ci/postgres.sh did not start PostgreSQL")
        pytest.skip("no PostgreSQL: run .ci/postgres.sh")
    url = url_file.read_text().strip()
    # the pid alone could meet a database a killed run left in a cluster .ci/postgres.sh reuses
    name = f"losstune_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = url.rsplit("/", 1)[0] + "/postgres"
    import sqlalchemy

    engine = sqlalchemy.create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    try:
        _two_workers(url.rsplit("/", 1)[0] + f"/{name}")
    finally:
        engine.dispose()
        with sqlalchemy.create_engine(admin, isolation_level="AUTOCOMMIT").connect() as conn:
            conn.execute(sqlalchemy.text(f"DROP DATABASE {name} WITH (FORCE)"))


def test_decide_pairs_rounds_so_a_slow_spell_of_the_host_does_not_veto_a_win() -> None:
    # Round 3 ran 1.5x slow for all three: each side's own spread is 50%, the ratio's 1%.
    default, winner = [10.0, 10.2, 15.0, 9.9, 10.1], [7.0, 7.1, 10.5, 6.9, 7.1]
    control = [10.1, 10.1, 15.1, 10.0, 10.0]
    verdict = st.decide(default, winner, control)
    assert verdict.kept and verdict.gain == pytest.approx(1 - 7.1 / 10.1) and verdict.noise < 0.02
    # what the gate read is what it returns: the ratios over the baseline, the control's, their chance
    assert verdict.ratios == pytest.approx([w / d for w, d in zip(winner, default, strict=True)])
    assert verdict.control == pytest.approx([c / d for c, d in zip(control, default, strict=True)])
    assert verdict.chance == pytest.approx(st.chance(verdict.ratios, verdict.control))


def test_decide_reads_the_winner_against_the_controls_floor_not_a_bar_in_every_round() -> None:
    default = [10.0] * 5
    # In the L3 a config read 0.77-1.22 of itself round by round (performance.md, section 79).
    # A win of a fifth or more with one round at 1.02 stands clear of such a control: the bar in
    # every round vetoed it.
    wide = [8.8, 11.9, 10.3, 9.6, 10.5]
    assert st.decide(default, [6.9, 8.2, 6.7, 10.2, 6.9], wide).kept
    # a control within a few percent (a quiet DRAM-bound size's, some hours): 6% in every round is kept ...
    tight = [10.0, 10.1, 9.9, 10.05, 9.95]
    assert st.decide(default, [9.4, 9.3, 9.4, 9.35, 9.4], tight).kept
    # ... but not a 3% median gain however clean its rounds (MIN_GAIN: both main jobs of section 80
    # kept one at a 0.97 median that their bench tables read at the default's speed), nor a win
    # inside the control
    assert not st.decide(default, [9.7, 9.6, 9.7, 9.65, 9.7], tight).kept
    assert not st.decide(default, [9.7] * 5, [10.0] * 5).kept
    assert not st.decide(default, [9.0, 10.0, 9.5, 9.4, 9.3], [9.2, 10.4, 9.6, 10.0, 9.8]).kept
    assert not st.decide(default, default, default).kept  # the default against itself


def test_chance_is_the_exact_one_sided_mann_whitney_p_value() -> None:
    assert st.out_of_order([1.0, 2.0], [1.5, 3.0]) == 1.0  # 2.0 > 1.5
    assert st.out_of_order([1.0], [1.0]) == 0.5  # a tie counts half
    tie = [0.8, 0.81, 0.82, 0.83, 0.9]  # U = 0.5, rounded up against keeping: the chance of U <= 1
    assert st.chance(tie, [0.9, 0.91, 0.92, 0.94, 0.96]) == pytest.approx(2 / 252)
    # 5 rounds each: 252 orders, U 0..5 in 1, 1, 2, 3, 5, 7 of them
    control = [0.9, 0.91, 0.92, 0.94, 0.96]
    assert st.chance([0.8, 0.81, 0.82, 0.83, 0.84], control) == pytest.approx(1 / 252)
    assert st.chance([0.8, 0.81, 0.82, 0.83, 0.905], control) == pytest.approx(2 / 252)
    assert st.chance([0.8, 0.81, 0.82, 0.83, 0.935], control) == pytest.approx(7 / 252)
    assert st.chance([0.8, 0.81, 0.82, 0.83, 0.97], control) == pytest.approx(19 / 252)  # one round above all
    assert st.chance([1.0, 1.1], [0.5, 0.6]) == 1.0  # above all: every order is this low or lower
    assert st.chance([0.5, 0.6], [1.0, 1.1]) == pytest.approx(1 / 6)  # 2 rounds never show it at 5%
    assert sum(st._orderings(5, 5)) == 252 and sum(st._orderings(3, 4)) == 35


def test_busy_host_is_a_load_of_one_runnable_thread_more_than_the_cpus() -> None:
    assert st.busy_host({"load1": [1.2, 3.0], "cpus": 2})
    assert not st.busy_host({"load1": [1.2, 2.9], "cpus": 2})
    assert not st.busy_host({"noise": 0.1})  # decided before the load was recorded


def test_busy_host_is_a_cpu_wait_of_busy_wait_or_more_whatever_the_load_read() -> None:
    quiet_load = {"load1": [0.3, 0.4], "cpus": 2}
    assert st.busy_host({**quiet_load, "cpu_wait": timing.BUSY_WAIT})  # the lagging load read quiet
    assert not st.busy_host({**quiet_load, "cpu_wait": timing.BUSY_WAIT / 2})
    assert not st.busy_host({**quiet_load, "cpu_wait": None})  # an OS that does not say: the load decides
    for none in (float("nan"), True):  # no reading either (pandas' gap, a flag): the quiet load decides
        assert not st.busy_host({**quiet_load, "cpu_wait": none})
    assert st.busy_host({"load1": [3.0], "cpus": 2, "cpu_wait": 0.0})  # either reading makes it busy
    reading = st.busy_reading({**quiet_load, "cpu_wait": 0.31})
    assert reading == "1-minute load 0.3-0.4 on 2 CPUs; waited for a CPU 31% of its run"
    assert st.busy_reading({"load1": [3.0], "cpus": 2}).endswith("waited for a CPU (not recorded) of its run")


def _pin(tids: list[int], cpus: set[int]) -> None:
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
        except OSError:  # a thread that ended since the listing
            pass


@pytest.mark.skipif(timing.sched_times() is None, reason="the OS gives no per-thread scheduler times")
def test_with_the_load_average_mocked_quiet_a_decision_beside_busy_processes_is_busy_by_its_cpu_wait(
    storage: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The contention is real: every thread of this process (numba's pool too) pinned to one CPU
    # with two spinning processes pinned beside them, the other CPUs left to the rest of the test
    # run. The load average is mocked quiet, as it reads in the first minute of a job that takes a CPU.
    monkeypatch.setattr(st.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    mask = os.sched_getaffinity(0)
    cpu = min(mask)
    with spinning_on(cpu, 2):
        try:
            # The backend loaded first: numba reads its thread count, and the backend its device facts,
            # once per process, and a process pinned to one CPU would keep "1t" for every later test.
            backends.get("cpu")
            _pin([int(t) for t in os.listdir("/proc/self/task")], {cpu})
            with caplog.at_level("WARNING", logger="losstune"):
                result = st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=3))
        finally:
            _pin([int(t) for t in os.listdir("/proc/self/task")], mask)
    wait = result.final["cpu_wait"]
    assert isinstance(wait, float) and wait >= timing.BUSY_WAIT and st.busy_host(result.final)
    warned = [r.getMessage() for r in caplog.records if "decided on a busy host" in r.getMessage()]
    assert warned and "1-minute load 0.0-0.0" in warned[0] and f"waited for a CPU {wait:.0%}" in warned[0]


def test_plumbing_with_a_mocked_load_average_a_decision_on_a_busy_host_is_recorded_and_warned(
    storage: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The load average is the one thing mocked, and the CPU wait left unread (the host's own are
    # whatever the test run makes them).
    cpus = os.cpu_count() or 1
    monkeypatch.setattr(st.os, "getloadavg", lambda: (cpus + 1.5, 0.0, 0.0))
    monkeypatch.setattr(st.timing, "sched_times", lambda: None)
    with caplog.at_level("WARNING", logger="losstune"):
        result = st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=3))
    assert result.final["load1"] == [cpus + 1.5, cpus + 1.5] and result.final["cpus"] == cpus
    assert result.final["cpu_wait"] is None
    assert any("decided on a busy host" in r.getMessage() and result.name in r.getMessage() for r in caplog.records)
    monkeypatch.setattr(st.os, "getloadavg", lambda: (0.5, 0.0, 0.0))
    caplog.clear()
    with caplog.at_level("WARNING", logger="losstune"):
        quiet = st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=3))
    assert not st.busy_host(quiet.final) and not any("busy host" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "text",
    ["some notes about tuning\n", "some notes about tuning", '{"trials": 40}\n', "[1, 2]\n"],
    ids=["a line of text", "a line without its newline", "a JSON object not a record", "a JSON list"],
)
def test_a_file_of_one_line_of_other_text_is_refused_as_a_journal_and_left_as_it_was(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """optuna's replay skips a last line that does not parse (a record still being written, it
    assumes), so a one-line file read as an empty journal and a tune appended its records to it."""
    notes = tmp_path / "notes.log"
    notes.write_text(text)
    for create in (True, False):
        with pytest.raises(ValueError, match="expected an optuna journal .* whose first line is not one") as e:
            st.open_storage(str(notes), create=create)
        assert repr(str(notes)) in str(e.value)
    assert main(["show", "--storage", str(notes)]) == 2
    assert f"got {str(notes)!r}, whose first line is not one" in capsys.readouterr().err
    assert notes.read_text() == text


def test_a_journal_whose_last_record_was_cut_off_is_read_with_a_warning_and_refused_for_writing(
    storage: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Under the journal's lock a last line without its newline is a write cut off, not one in
    progress; a writer's next record would be appended onto it, making a line no replay parses, so a
    writer stops and says how many bytes to cut; a reader (show, freeze, the dashboard) reads on."""
    optuna.create_study(study_name="kept", storage=st.open_storage(storage))
    path = Path(storage)
    whole = path.read_bytes()
    path.write_bytes(whole + b'{"op_code":5,"worker_id":"w","study_id":0,"datetime_sta')
    cut = path.read_bytes()
    with pytest.raises(ValueError, match=r"cut off mid-write \(55 bytes after its last newline") as e:
        st.open_storage(storage)
    assert f"truncate -s {len(whole)} {path}" in str(e.value)
    assert path.read_bytes() == cut
    with caplog.at_level("WARNING", logger="losstune"):
        assert _study_names(st.open_storage(storage, create=False)) == {"kept"}
    assert "cut off mid-write" in caplog.text and "reading the records before it" in caplog.text
    assert path.read_bytes() == cut
    os.truncate(path, len(whole))  # as the message says: the journal takes writes again
    optuna.create_study(study_name="after", storage=st.open_storage(storage))
    assert _study_names(st.open_storage(storage, create=False)) == {"kept", "after"}


def test_a_ctrl_c_simulated_in_a_trial_leaves_its_point_to_the_next_run_and_spends_no_budget(
    storage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KeyboardInterrupt raised in the third trial's timing (where a Ctrl-C lands: a trial's
    time is mostly its timing), then the same tune again: optuna fails the interrupted trial, and
    untagged it counted as measured and its point was never taken up (a grid decided on one point
    fewer; a sampled study measured one trial short)."""
    real = st._trial_timing
    calls = []

    def interrupted_third(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(st, "_trial_timing", interrupted_third)
    opts = st.TuneOptions(storage=storage, sampler="grid", trials=6, min_time_s=0.002, rounds=2)
    with pytest.raises(KeyboardInterrupt):
        st.tune_case(CASE, opts)
    monkeypatch.setattr(st, "_trial_timing", real)
    (name,) = _study_names(st.open_storage(storage))
    study = optuna.load_study(study_name=name, storage=st.open_storage(storage))
    (cut,) = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))
    assert cut.user_attrs.get("failure") == "interrupted"
    st.tune_case(CASE, dataclasses.replace(opts, trials=None))  # the whole grid
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    points = {tuple(sorted(t.params.items())) for t in done}
    space = st._Bench.make(CASE, "cpu").executor(None).space
    assert len(points) == len(done) == space.size  # every point once: the interrupted one too
    assert tuple(sorted(cut.params.items())) in points


def test_a_freeze_waits_for_the_tables_lock_and_keeps_what_its_holder_wrote(storage: str, tmp_path: Path) -> None:
    """freeze reads the table, merges and replaces it; two at once each wrote its merge over the
    other's (an entry gone, both saying they froze). A holder of the table's lock (another freeze,
    a restamp) writes an entry while this freeze waits; the freeze then merges into that table."""
    st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=2))
    path, _ = freeze(storage, "cpu", root=tmp_path / "first")
    (ours,) = json.loads(path.read_text())["entries"]
    theirs = ours | {"bucket": int(ours["bucket"]) + 4, "study": "another-freeze"}
    table = tmp_path / "second" / path.relative_to(tmp_path / "first")
    done: list[tuple[Path, int]] = []
    with tuner.freeze.table_lock(table):
        worker = threading.Thread(target=lambda: done.append(freeze(storage, "cpu", root=tmp_path / "second")))
        worker.start()
        worker.join(1.0)
        assert worker.is_alive() and not done  # waiting for the lock, nothing written
        write_atomic(table, {"schema_version": frozen.SCHEMA_VERSION, "entries": [theirs], "common": {}})
    worker.join(60)
    assert done == [(table, 2)]
    entries = json.loads(table.read_text())["entries"]
    assert [e["study"] for e in entries] == [ours["study"], "another-freeze"]


def test_a_reader_whose_lock_is_refused_mocked_still_reads_and_checks_a_whole_first_line(
    storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The lock's file is made beside the journal; a reader of a read-only checkout cannot make it
    (mocked: root writes anywhere). It reads without it, and still refuses a whole first line of
    other text; a writer there gets the error."""
    optuna.create_study(study_name="kept", storage=st.open_storage(storage))
    Path(storage).write_bytes(Path(storage).read_bytes() + b'{"op_code":5,"work')  # a record in its write?
    notes = tmp_path / "notes.log"
    notes.write_text("some notes about tuning\n")

    def refused(self: object) -> bool:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(optuna.storages.journal.JournalFileOpenLock, "acquire", refused)
    with caplog.at_level("WARNING", logger="losstune"):
        assert _study_names(st.open_storage(storage, create=False)) == {"kept"}
    assert "cut off" not in caplog.text  # unlocked, it may be a write in progress
    with pytest.raises(ValueError, match="whose first line is not one"):
        st.open_storage(str(notes), create=False)
    with pytest.raises(PermissionError):
        st.open_storage(storage)


def test_a_freeze_has_this_process_read_its_table_again(
    storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process reads a table once and keeps it (kernels.frozen.load); `tune --freeze --bench`
    benches in the process that froze, so the freeze must drop what was read before it."""
    st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=2))
    monkeypatch.setattr(frozen, "CONFIG_DIR", tmp_path)
    frozen.reset()
    try:
        device = backends.get("cpu").facts().name
        assert frozen.load("cpu", device) is None  # no table yet: read, and kept as none
        path, count = freeze(storage, "cpu")
        table = frozen.load("cpu", device)
        assert table is not None and table.path == path and len(table.entries) == count == 1
    finally:
        frozen.reset()


def test_a_freeze_refuses_a_table_of_another_schema_and_leaves_it(storage: str, tmp_path: Path) -> None:
    """A table of another schema version reads as JSON; merged into, it would be rewritten as this
    schema with whatever of its entries parse, the rest lost."""
    st.tune_case(CASE, st.TuneOptions(storage=storage, min_time_s=0.002, rounds=2, trials=2))
    path = frozen.config_path("cpu", backends.get("cpu").facts().name, tmp_path)
    write_atomic(path, {"schema_version": frozen.SCHEMA_VERSION + 1, "entries": [{"op": "mse", "future": 1}]})
    before = path.read_bytes()
    with pytest.raises(ValueError, match=f"got schema {frozen.SCHEMA_VERSION + 1}; restore it or move it aside"):
        freeze(storage, "cpu", root=tmp_path)
    assert path.read_bytes() == before


def test_a_grids_budget_counts_a_point_measured_twice_once(storage: str) -> None:
    """A history holding one point twice (two workers drew it, or a queue from before the dedupe):
    a grid's budget is of points, so the sweep still measures as many distinct points as asked."""
    bench = st._Bench.make(CASE, "cpu")
    space = bench.executor(None).space
    study = optuna.create_study(study_name=st.name_for(CASE, bench, "cpu"), storage=st.open_storage(storage))
    (twice,) = (st._params(space, c) for c in space.sample(1, seed=3))
    dists = {name: optuna.distributions.CategoricalDistribution(values) for name, values in st._choices(space).items()}
    for value in (1.0, 1.1):
        study.add_trial(optuna.trial.create_trial(params=twice, distributions=dists, value=value))

    st.tune_case(CASE, st.TuneOptions(storage=storage, sampler="grid", trials=4, min_time_s=0.002, rounds=2))

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    assert len({tuple(sorted(t.params.items())) for t in complete}) == 4 and len(complete) == 5


def test_a_running_trial_is_reclaimed_only_where_its_worker_was_of_this_host_and_is_gone(storage: str) -> None:
    """Trials left RUNNING: this host's whose process is gone are marked interrupted; one of a
    live process here, or of another host sharing the journal (whose pid means nothing here), stays."""
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(gone.stdout)
    study = optuna.create_study(storage=st.open_storage(storage))
    host = st.socket.gethostname()
    workers = [f"{host}:{dead}", f"{host}:{os.getpid()}", f"elsewhere-{host}:{dead}"]
    for worker in workers:
        trial = study.ask()
        trial.set_user_attr("worker", worker)
    assert st._reclaim_interrupted(study) == 1
    trials = study.get_trials(deepcopy=False)
    assert [t.state.name for t in trials] == ["FAIL", "RUNNING", "RUNNING"]
    assert trials[0].user_attrs["failure"] == "interrupted"
