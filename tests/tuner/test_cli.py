"""Every subcommand, driven with argv as a user types it (CPU backend, small cases)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from kernels import backends, frozen, timing
from kernels.backends import cpu_loops
from tests.helpers import count_journal_storages
from tuner import study as st
from tuner.cli import main
from tuner.problems import build_cases

QUICK = ["--op", "mse", "--shape", "2^10", "--reduction", "mean", "--backend", "cpu"]


def test_tune_show_freeze_bench_roundtrip(storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", *QUICK, "--storage", storage, "--min-time", "0.002", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    # The whole CPU grid on 2 threads: scalar_grad 5 tiles x 2 cores x 3 prefetch with ordinary
    # stores, 3 tiles (<= 4096) x 2 x 3 streamed; strided 5 x 2.
    assert len(rows) == 1 and rows[0]["trials"] == 5 * 2 * 3 + 3 * 2 * 3 + 5 * 2
    assert rows[0]["speedup_vs_default"] >= 1.0 or not rows[0]["tuned"]
    assert main(["show", "--storage", storage]) == 0
    assert "mse float32 1024 mean" in capsys.readouterr().out
    root = tmp_path / "configs"
    assert main(["freeze", "--storage", storage, "--config-dir", str(root)]) == 0
    assert "froze 1 entries" in capsys.readouterr().out
    path = next(root.glob("cpu/*.json"))
    table = json.loads(path.read_text())
    assert table["schema_version"] == 1 and table["entries"][0]["op"] == "mse"
    # a device the journal has no studies of is named as --device, with the devices it has
    assert main(["freeze", "--storage", storage, "--config-dir", str(root), "--device", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert (
        f"--device: expected one of the devices of the finished cpu studies ['{table['device']}'], got 'nosuch'" in err
    )
    # a table freeze cannot read is never replaced (its entries would go without a word)
    for broken, said in (
        ('{"schema_version": 1, "entries": [', "JSONDecodeError"),
        ('{"schema_version": 9}', "schema 9"),
    ):
        path.write_text(broken)
        assert main(["freeze", "--storage", storage, "--config-dir", str(root)]) == 2
        err = capsys.readouterr().err
        assert "config: expected a " in err and str(path) in err and said in err and "move it aside" in err
        assert path.read_text() == broken
    assert main(["bench", *QUICK, "--min-time", "0.002", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert "roofline: copy bandwidth" in out and "mse" in out


def test_tune_with_table_output_and_freeze_flag(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tune", *QUICK, "--storage", storage, "--trials", "4", "--min-time", "0.002", "--no-progress"]
    # --rounds are the finalists' (3 here); the bench table after them takes bench's own
    assert main([*argv, "--rounds", "3", "--freeze", "--config-dir", str(tmp_path), "--bench"]) == 0
    out = capsys.readouterr().out
    assert "x default" in out and "froze 1 entries" in out and "roofline: copy bandwidth" in out
    # the gate's reading: the control's ratios over the baseline (min-max) and the chance
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("case "))
    assert lines[at].split()[7:10] == ["noise", "control", "chance"]
    row = lines[at + 1]
    assert re.search(r"\d\.\d\d-\d\.\d\d +(\d\.\d{3}|-) ", row), row  # "-": the default won


def test_tune_times_its_finalists_in_the_rounds_and_number_it_is_given(
    storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["tune", *QUICK, "--storage", storage, "--trials", "6", "--min-time", "0.002", "--json"]
    assert main([*argv, "--finalists", "1", "--rounds", "3", "--grain", "launch"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    held = row["baseline"] == "incumbent"  # the shipped table's entry for the case, where it has one
    assert row["grain"] == "launch"  # as asked; unset, a case below 2^24 elements is timed run by run
    # the default, the incumbent if any, and the one best trial, timed in 3 rounds
    assert len(row["finalists"]) == 2 + held and row["best_candidate"] in row["finalists"]
    assert len(row["round_ratios"]) == 3 and len(row["control_ratios"]) == 3
    # unset, the tuner's own: 3 best trials (of 6 measured, the default and any incumbent among them) and 5 rounds
    assert main([*argv, "--study-name", "again"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert len(row["finalists"]) == 1 + held + st.TuneOptions.finalists
    assert len(row["round_ratios"]) == st.TuneOptions.rounds
    assert row["grain"] == "run"


def test_a_transposed_study_tunes_streaming_and_freezes_an_entry_of_its_own_layout(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--layout transposed: the inputs are 64-row transposed views, the planner's TRANSPOSED
    layout, whose grid is tile x cores x stream; the frozen entry is keyed by that layout and found by
    the same call."""
    argv = ["tune", "--op", "kl_div", "--dtype", "bfloat16", "--shape", "2^12", "--reduction", "mean"]
    argv += ["--layout", "transposed", "--storage", storage, "--min-time", "0.002", "--json"]
    assert main([*argv, "--freeze", "--config-dir", str(tmp_path)]) == 0
    rows = json.loads(capsys.readouterr().out.split("froze")[0])
    case = build_cases(("kl_div",), ("bfloat16",), ("2^12",), ("mean",), ("transposed",))[0]
    g, x, t = case.inputs("cpu")
    ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
    knobs = dict(ex.space.knobs)
    assert knobs["tile"] == cpu_loops.TRANSPOSED_TILES and len(knobs["stream"]) == 2
    # the whole grid: the host's tiles (one with AVX-512, three without) x cores x stream
    assert rows[0]["trials"] == ex.space.size and "-transposed-" in rows[0]["study"]
    assert "kl_div bfloat16 4096 transposed mean" in rows[0]["case"]
    (entry,) = json.loads(next(tmp_path.glob("cpu/*.json")).read_text())["entries"]
    assert entry["layout"] == "transposed" and entry["config"]["variant"] == "strided"
    assert ex.key.layout.value == "transposed" and ex.space.hash == entry["space_hash"]


def test_doctor_reports_each_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "cpu               loads" in out
    from kernels import backends

    names = backends.get("cpu").facts().lookup_names  # a host whose chip LLVM names reads two tables
    assert len(names) == 1 or f"frozen tables read: {', '.join(names)}" in out
    for name in names:  # each shipped table the host reads, with its stale count (none ship stale)
        shipped = frozen.config_path("cpu", name)
        assert not shipped.exists() or f"{shipped.name}: " in out and " 0 stale by kernel source" in out
    assert "npu               does not load" in out and "torch_npu" in out
    # the backend's import put numba's copy propagation without its deepcopies in place
    assert "compile: numba's copy propagation without its deepcopies (LOSSTUNE_NUMBA_PATCHES=0 turns it off)" in out
    # what each CPU loop switch picked here, and that none was set (CI sets none)
    from kernels.backends import cpu

    picks = " ".join(f"{name}={value}" for name, value in cpu.BACKEND.picks().items())
    assert f"loops: {picks}; none forced (LOSSTUNE_CPU_*)" in out


def test_doctor_and_a_report_name_the_cpu_loop_switches_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With a LOSSTUNE_CPU_ loop switch set (to the host's own pick, so the loops run are the same),
    doctor says it, and a report's header says its CPU loops were forced and its host stores it."""
    from kernels.backends import cpu

    switch = "LOSSTUNE_CPU_APART=" + ("1" if cpu.BACKEND.picks()["APART"] == "on" else "0")
    monkeypatch.setenv(*switch.split("="))
    assert main(["doctor"]) == 0
    assert f"; forced by {switch}: not this host's own loops" in capsys.readouterr().out
    assert main(["bench", "--op", "l1", "--shape", "2^10", "--reduction", "mean", "--min-time", "0.002", "--json"]) == 0
    said = capsys.readouterr()
    assert json.loads(said.out)[0]["op"] == "l1"  # stdout the rows alone
    assert f"losstune bench: CPU loops forced by {switch}: not this host's own loops" in said.err
    argv = ["bench", "--report", "--op", "l1", "--shape", "2^10", "--reduction", "mean", "--layout", "contiguous"]
    assert (
        main([*argv, "--min-time", "0.002", "--rounds", "1", "--goal-rounds", "1", "--out", str(tmp_path / "r")]) == 0
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert f"commit {report['commit']}" in report["header"] and f", CPU loops forced by {switch}, " in report["header"]
    assert report["host"]["cpu_forced"] == {"LOSSTUNE_CPU_APART": switch.split("=")[1]}
    assert report["host"]["cpu_loops"] == cpu.BACKEND.picks()
    assert (tmp_path / "r.txt").read_text().startswith(report["header"])


def test_doctor_reports_the_compiled_loop_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its directory, entries and size, from a real entry (a loop compiled into it); or that it is off."""
    import numpy as np
    from numba import njit

    from kernels.backends import jit_cache

    monkeypatch.setenv(jit_cache.DIR_ENV, str(tmp_path / "jit"))
    monkeypatch.delenv(jit_cache.ENABLE_ENV, raising=False)
    monkeypatch.setattr(jit_cache, "_tainted", [])  # saves again, whatever earlier tests here compiled
    double = njit(lambda a: a * 2)
    jit_cache.attach([double])
    assert double(np.float32(2.0)) == 4.0
    ((entry,),) = [list((tmp_path / "jit").rglob("*.nbc"))]
    assert main(["doctor"]) == 0
    size = entry.stat().st_size / 2**20
    out = capsys.readouterr().out
    assert f"compiled-loop cache {tmp_path / 'jit'}: 1 entries, {size:.1f} MiB, capped at 1024 MiB" in out
    monkeypatch.setenv(jit_cache.MAX_ENV, "lots")
    assert main(["doctor"]) == 0
    assert "not pruned: LOSSTUNE_JIT_CACHE_MAX_MB: expected a whole number of MiB" in capsys.readouterr().out
    monkeypatch.setenv(jit_cache.ENABLE_ENV, "0")
    assert main(["doctor"]) == 0
    assert "compiled-loop cache off (LOSSTUNE_JIT_CACHE=0)" in capsys.readouterr().out


def test_cache_prunes_to_the_cap_clears_and_refuses_a_bad_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over files laid out as entries (their bytes are never read here): --prune keeps the most
    recently used under the cap, --clear removes the rest, a bad cap is refused with every entry kept."""
    import os

    from kernels.backends import jit_cache

    root = tmp_path / "jit"
    monkeypatch.setenv(jit_cache.DIR_ENV, str(root))
    monkeypatch.setenv(jit_cache.MAX_ENV, "2")
    (root / "ab").mkdir(parents=True)
    for age in range(4):  # 1 MiB each, entry 0 the most recently used
        entry = root / "ab" / f"{age}.nbc"
        entry.write_bytes(b"\0" * 2**20)
        os.utime(entry, (0, 1e9 - age * 60))
    monkeypatch.setenv(jit_cache.MAX_ENV, "-1")
    assert main(["cache", "--prune"]) == 2
    assert "LOSSTUNE_JIT_CACHE_MAX_MB: expected a whole number of MiB, 0 or more, got '-1'" in capsys.readouterr().err
    assert len(list(root.rglob("*.nbc"))) == 4
    monkeypatch.setenv(jit_cache.MAX_ENV, "2")
    assert main(["cache"]) == 0
    assert capsys.readouterr().out == f"{root}: 4 entries, 4.0 MiB of 2 MiB\n"
    assert main(["cache", "--prune"]) == 0
    assert capsys.readouterr().out == f"removed 2 entries, 2.0 MiB\n{root}: 2 entries, 2.0 MiB of 2 MiB\n"
    assert sorted(p.name for p in root.rglob("*.nbc")) == ["0.nbc", "1.nbc"]
    stuck = root / "cd" / "stuck.nbc"  # a directory by an entry's name: unlink refuses it (EISDIR)
    (stuck / "inside").mkdir(parents=True)
    os.utime(stuck, (0, 1))  # the least recently used of all
    assert main(["cache", "--prune"]) == 1  # passed over: the next least recently used goes instead
    err = capsys.readouterr().err
    assert f"losstune cache: error: {root}: removed 1 entries (1.0 MiB), 1 could not be removed ({stuck}: " in err
    assert sorted(p.name for p in root.rglob("*.nbc")) == ["0.nbc", "stuck.nbc"]
    (stuck / "inside").rmdir()
    stuck.rmdir()
    assert main(["cache", "--prune"]) == 0 and capsys.readouterr().out.startswith("removed 0 entries")
    deeper = root / "mine" / "deep" / "kept.nbc"  # not the cache's layout: a clear leaves it
    deeper.parent.mkdir(parents=True)
    deeper.write_bytes(b"mine")
    assert main(["cache", "--clear"]) == 0
    assert capsys.readouterr().out.startswith("removed 1 entries, 1.0 MiB\n")
    assert list(root.rglob("*.nbc")) == [deeper]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["tune", *QUICK, "--trials", "0"], "--trials: expected a positive number, got 0"),
        (["tune", "--op", "huber"], "op: expected mse, l1, kl_div or kl_div-log, got 'huber'"),
        (["tune", "--shape", "4y4"], "shape: expected N, B^E or AxBxC, got '4y4'"),
        (["tune", "--dtype", "int8"], "dtype: expected one of float32, float16, bfloat16, got 'int8'"),
        (["tune", "--storage", "redis://x"], "storage: expected a journal file path or a postgresql:// URL"),
        (
            ["tune", "--layout", "diagonal"],
            "layout: expected one of contiguous, broadcast, transposed, summed, got 'diagonal'",
        ),
        (
            ["tune", "--layout", "transposed", "--shape", "100"],
            "layout: transposed needs a 1-d shape of a multiple of 64 elements, got (100,)",
        ),
        (
            ["tune", *QUICK, "--sampler", "grid", "--study-name", "x", "--op", "l1"],
            "--study-name: expected exactly one",
        ),
        (["tune", *QUICK, "--skip-busy"], "--skip-busy: expected with --freeze"),
        (["tune", *QUICK, "--finalists", "0"], "--finalists: expected a positive number, got 0"),
        (["tune", *QUICK, "--rounds", "2"], "--rounds: expected 3 or more (in fewer the gate can never keep"),
    ],
)
def test_bad_arguments_exit_2_with_a_clear_error(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str], storage: str
) -> None:
    if "--storage" not in argv:
        argv = [*argv, "--storage", storage]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_tune_refuses_a_grain_it_does_not_know(capsys: pytest.CaptureFixture[str], storage: str) -> None:
    with pytest.raises(SystemExit) as done:
        main(["tune", *QUICK, "--storage", storage, "--grain", "cycle"])
    assert done.value.code == 2
    assert "argument --grain: invalid choice: 'cycle' (choose from 'run', 'launch')" in capsys.readouterr().err


def test_freeze_with_nothing_to_freeze_writes_nothing(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A journal that is not there is named, and not made; one with no finished study says so."""
    assert main(["freeze", "--storage", storage, "--config-dir", str(tmp_path)]) == 2
    assert f"storage: expected an existing journal file, got {storage!r} (no such file)" in capsys.readouterr().err
    assert not Path(storage).exists()
    Path(storage).touch()  # an empty journal: no studies
    assert main(["freeze", "--storage", storage, "--config-dir", str(tmp_path)]) == 2
    assert "no finished cpu studies" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.json"))


def test_bad_arguments_are_named_before_anything_is_measured_or_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each once ended in a traceback, an unnamed message or a run with the value; none of them
    leaves a file or a folder behind (a mistyped storage path included)."""
    storage = str(tmp_path / "new" / "journal.log")
    case = ["--op", "mse", "--shape", "64"]
    for argv, said in (
        (["tune", *case, "--backend", "cuda", "--storage", storage], "--backend: expected a backend that loads here"),
        (["bench", *case, "--backend", "npu"], "--backend: expected a backend that loads here"),
        (["bench", *case, "--backend", "npu", "--report"], "--backend: expected a backend that loads here"),
        (
            ["tune", *case, "--seed", "-1", "--storage", storage],
            "--seed: expected a whole number from 0 to 2^32 - 1, got -1",
        ),
        (
            ["tune", *case, "--seed", str(2**32), "--storage", storage],
            "--seed: expected a whole number from 0 to 2^32 - 1, got 4294967296",
        ),
        (
            ["tune", "--op", "mse", "--shape", "-5", "--storage", storage],
            "shape: expected sizes of 1 or more, got '-5'",
        ),
        (["bench", *case, "--rounds", "0"], "--rounds: expected a positive number, got 0"),
        (["bench", *case, "--min-time", "-1"], "--min-time: expected a positive number, got -1.0"),
        (["show", "--storage", storage], f"storage: expected an existing journal file, got {storage!r}"),
    ):
        assert main(argv) == 2, argv
        assert said in capsys.readouterr().err, argv
    assert not (tmp_path / "new").exists()
    garbage = tmp_path / "garbage.log"
    garbage.write_text("not json\nnor this\n")  # a broken last line alone is skipped: optuna's torn write
    assert main(["show", "--storage", str(garbage)]) == 2
    err = capsys.readouterr().err
    assert f"storage: expected an optuna journal (one JSON record a line), got {str(garbage)!r}" in err
    assert garbage.read_text() == "not json\nnor this\n"


def test_machine_names_the_accelerator_and_registers_with_asv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # asv writes ~/.asv-machine.json
    assert main(["machine", "--register"]) == 0
    name = capsys.readouterr().out.strip()
    # this host has no accelerator (a run under CPU loop switches names them after it: tuner/machine.py)
    assert name.partition("-forced-")[0].endswith("-cpu-only") and "\n" not in name
    assert name in json.loads((tmp_path / ".asv-machine.json").read_text())
    assert main(["machine", "--json"]) == 0
    described = json.loads(capsys.readouterr().out)
    assert described["accelerators"] == [] and described["cpu_model"]
    # The vector tier and the microarchitecture are in the name: asv compares runs of one name only
    # (tuner/machine.py).
    assert name.startswith(f"{described['arch']}-{described['isa'] + '-' if described['isa'] else ''}")
    assert described["microarch"] == "" or f"-{described['microarch']}-cpu-only" in name


def test_a_tune_of_two_cases_and_its_freeze_replay_the_journal_once(
    storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each journal storage opened replays the whole log (3.4 s for the committed one): a tune's
    studies and its freeze share one (study.shared_journals). A spy on the storage's construction
    counts them (plumbing); the studies are real."""
    made = count_journal_storages(monkeypatch)
    argv = ["tune", *QUICK, "--op", "l1", "--storage", storage, "--trials", "2", "--min-time", "0.002"]
    assert main([*argv, "--freeze", "--config-dir", str(tmp_path), "--no-progress"]) == 0
    assert "froze 2 entries" in capsys.readouterr().out
    assert made == ["journal"]


def test_tune_freeze_takes_this_hosts_studies_from_a_journal_that_holds_another_devices(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A journal shared between an AVX-512 and an AVX2 host holds studies of two devices: `tune
    --freeze` freezes this host's into this host's table and leaves the other's alone, where a bare
    `freeze` must be told which device."""
    import optuna

    from kernels import backends
    from tuner.study import open_storage

    argv = ["tune", *QUICK, "--storage", storage, "--trials", "4", "--min-time", "0.002", "--json"]
    assert main(argv) == 0
    (row,) = json.loads(capsys.readouterr().out)
    other = f"{row['study']}-other"
    optuna.copy_study(
        from_study_name=row["study"],
        from_storage=open_storage(storage),
        to_storage=open_storage(storage),
        to_study_name=other,
    )
    optuna.load_study(study_name=other, storage=open_storage(storage)).set_user_attr("device", "x86_64-other-2t")
    assert main(["freeze", "--storage", storage, "--config-dir", str(tmp_path)]) == 2
    assert "expected exactly one device" in capsys.readouterr().err and not list(tmp_path.rglob("*.json"))
    here = backends.get("cpu").facts().name
    named = ["freeze", "--storage", storage, "--study", other, "--device", here, "--config-dir", str(tmp_path)]
    assert main(named) == 2  # a study named for one device's table that another device decided
    assert f"expected studies of device {here}, got ['{other}']" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.json"))
    assert main([*argv, "--freeze", "--config-dir", str(tmp_path)]) == 0
    assert "froze 1 entries" in capsys.readouterr().out
    assert [p.name for p in tmp_path.rglob("*.json")] == [f"{here}.json"]


def test_tune_freeze_writes_the_studies_it_decided_and_no_other(
    storage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A study re-swept without --freeze stays out of the table when another is tuned with it:
    `tune --freeze` merges the studies of its own run, `freeze --study` one by name, and a bare
    `freeze` all of them. A name not in the journal writes nothing."""
    quick = ["--storage", storage, "--trials", "2", "--rounds", "3", "--min-time", "0.002", "--json"]
    other = ["tune", "--op", "l1", "--shape", "2^10", "--reduction", "sum", "--backend", "cpu", *quick]
    assert main(other) == 0
    (unfrozen,) = json.loads(capsys.readouterr().out)
    assert main(["tune", *QUICK, *quick, "--freeze", "--config-dir", str(tmp_path)]) == 0
    (decided,) = json.loads(capsys.readouterr().out.split("froze")[0])
    (path,) = tmp_path.rglob("*.json")

    def studies() -> list[str]:
        return sorted(e["study"] for e in json.loads(path.read_text())["entries"])

    assert studies() == [decided["study"]]
    before = path.read_bytes()
    assert main(["freeze", "--storage", storage, "--study", "no-such-study", "--config-dir", str(tmp_path)]) == 2
    assert "--study" in (err := capsys.readouterr().err) and "no-such-study" in err
    assert path.read_bytes() == before
    assert main(["freeze", "--storage", storage, "--study", unfrozen["study"], "--config-dir", str(tmp_path)]) == 0
    assert "froze 2 entries" in capsys.readouterr().out
    assert studies() == sorted([decided["study"], unfrozen["study"]])
    # the entry already there is carried as it was, byte for byte
    (kept,) = (e for e in json.loads(path.read_text())["entries"] if e["study"] == decided["study"])
    assert kept == next(e for e in json.loads(before)["entries"] if e["study"] == decided["study"])


def test_bench_report_sweeps_sizes_and_layouts_and_writes_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--report", "--op", "l1", "--shape", "2^10", "--shape", "2^22", "--reduction", "none"]
    timing = ["--min-time", "0.002", "--rounds", "1", "--goal-rounds", "2"]
    assert main([*argv, *timing, "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert "x vendor" in out and "one-shot/kernel" in out and "broadcast (" in out and "transposed (" in out
    data = json.loads((tmp_path / "report.json").read_text())
    assert [r["case"] for r in data["rows"]] == ["contiguous", "contiguous", "broadcast", "transposed"]
    assert all(r["roofline_pct"] > 0 and r["oneshot_s"] > 0 for r in data["rows"])
    assert [len(r["roofline_pct_rounds"]) for r in data["rows"]] == [1, 1, 2, 2]  # each row's own rounds
    assert [len(r["contiguous_x_rounds"]) for r in data["rows"]] == [0, 0, 2, 2]  # layout rows: over the partner
    assert (tmp_path / "report.txt").read_text().startswith("losstune bench --report on ")
    # the pages the vendor's allocations fault in, in the header and with the host (tuner.machine.torch_pages)
    assert data["host"]["torch_pages"] in data["header"] and "the vendor allocates its result" in data["header"]
    assert main(["bench", "--report", "--op", "l1", "--rounds", "0"]) == 2
    assert "--rounds: expected a positive number" in capsys.readouterr().err
    assert main(["bench", "--report", "--op", "l1", "--goal-rounds", "0"]) == 2
    assert "--goal-rounds: expected a positive number, got 0" in capsys.readouterr().err
    assert main(["bench", "--report", "--op", "l1", "--layout-rounds", "0"]) == 2  # its older name, still read
    assert "--goal-rounds: expected a positive number, got 0" in capsys.readouterr().err


def test_bench_refuses_the_reports_flags_without_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--out, --layout-size and --goal-rounds were read by --report only, and dropped silently
    without it: a user who named an --out file got none. Each is refused by name, before anything
    runs, and nothing is written."""
    out = tmp_path / "report"
    for flag, value in (("--out", str(out)), ("--layout-size", "2^20"), ("--goal-rounds", "7")):
        assert main(["bench", *QUICK, flag, value]) == 2
        err = capsys.readouterr().err
        assert f"{flag}: expected only with --report, got {flag} without it" in err
    assert not list(tmp_path.iterdir())


def test_bench_report_layout_picks_its_rows_each_beside_its_partner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--layout with --report: only the rows it names, each layout row still timed beside its
    contiguous partner (its x over it, round by round); a layout it does not know is refused by name
    before anything is measured or written."""
    from tuner import bench

    monkeypatch.setattr(bench, "REPORT_LAYOUT_SIZE", "2^12")
    argv = ["bench", "--report", "--op", "l1", "--op", "kl_div", "--shape", "2^12", "--reduction", "mean"]
    timing = ["--min-time", "0.002", "--rounds", "1", "--goal-rounds", "2"]
    assert main([*argv, *timing, "--layout", "transposed", "--layout", "summed", "--out", str(tmp_path / "r")]) == 0
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    assert [(r["op"], r["case"]) for r in rows] == [
        ("l1", "transposed"),
        ("kl_div", "transposed"),
        ("kl_div", "summed"),
    ]
    assert all(len(r["contiguous_x_rounds"]) == 2 and r["contiguous_s"] > 0 for r in rows)
    assert "transposed (" in capsys.readouterr().out
    assert main([*argv, *timing, "--layout", "diagonal", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "layout: expected one of contiguous, broadcast, transposed, summed, got 'diagonal'" in err
    assert not list(tmp_path.glob("bad*"))


def test_bench_report_layout_size_times_the_layout_rows_at_each_size_of_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--layout-size with --report: the layout rows at each size named, which the header names too;
    a size named twice is timed once; a size the sweep lacks (no contiguous partner to time beside)
    or not a 1-d size is refused by name, with what was expected, before anything is measured or
    written."""
    argv = ["bench", "--report", "--op", "l1", "--shape", "2^10", "--shape", "2^12", "--reduction", "mean"]
    timing = ["--min-time", "0.002", "--rounds", "1", "--goal-rounds", "1", "--layout", "transposed"]
    sizes = ["--layout-size", "2^12", "--layout-size", "1024", "--layout-size", "2^10"]  # 2^10 twice: once
    assert main([*argv, *timing, *sizes, "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert [(r["numel"], r["case"]) for r in report["rows"]] == [(2**12, "transposed"), (2**10, "transposed")]
    assert "for the layout rows (at 2^12, 2^10)" in report["header"]
    capsys.readouterr()
    assert main([*argv, *timing, "--layout-size", "2^21", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "--layout-size: expected sizes of the report's sweep (2^10, 2^12), got 2^21: add each with --shape" in err
    for size in ("2^x", "64x64", "0"):
        assert main([*argv, *timing, "--layout-size", size, "--out", str(tmp_path / "bad")]) == 2
        assert f"--layout-size: expected N or 2^K elements, got '{size}'" in capsys.readouterr().err
    assert not list(tmp_path.glob("bad*"))


def test_help_lists_every_subcommand_in_plain_words(capsys: pytest.CaptureFixture[str]) -> None:
    """argparse formats help strings with %: a bare '% r' once printed the action's dict into it."""
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for command in ("tune", "show", "freeze", "restamp", "bench", "goals", "doctor", "cache", "dashboard", "machine"):
        assert command in text
    assert "GB/s, % roofline" in " ".join(text.split()) and "option_strings" not in text
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    # the defaults tune's help names are the tuner's (the parser leaves them unset: TuneOptions holds them)
    text = " ".join(capsys.readouterr().out.split())
    assert f"table's entry (default {st.TuneOptions.finalists})" in text
    assert f"(default: the whole grid, or {st.SAMPLED_TRIALS})" in text
    assert f"(default {st.TuneOptions.rounds}, at least {st.fewest_rounds()}:" in text
    # --grain's choices are timing.Grain's, and its help names the size rule's bound (goals.LARGE_NUMEL)
    assert "{run,launch}" in text and [g.value for g in timing.Grain] == ["run", "launch"]
    assert "default: launch on the CPU from 2^24 elements" in text


def test_plumbing_with_a_mocked_load_average_tune_warns_of_a_busy_host_on_a_line_of_its_own(
    storage: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Only the load average is mocked (the CPU wait left unread); the progress bar is on, as a user runs tune.
    from tuner import study

    monkeypatch.setattr(study.os, "getloadavg", lambda: ((os.cpu_count() or 1) + 2.0, 0.0, 0.0))
    monkeypatch.setattr(study.timing, "sched_times", lambda: None)
    assert main(["tune", *QUICK, "--storage", storage, "--trials", "3", "--min-time", "0.002"]) == 0
    captured = capsys.readouterr()
    warned = [line for line in captured.err.replace("\r", "\n").splitlines() if "decided on a busy host" in line]
    assert warned and all(line.startswith("cpu-") for line in warned), captured.err
    assert "(busy host)" in captured.out  # the summary marks the decision too


def test_plumbing_with_a_mocked_load_average_freeze_skip_busy_keeps_the_tables_entry(
    storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Only the load average is mocked (a quiet host, then a busy one), the CPU wait left unread so
    # that the test run's own load does not decide; tuning and freezing are real.
    from tuner import study

    monkeypatch.setattr(study.timing, "sched_times", lambda: None)
    tune = ["tune", *QUICK, "--storage", storage, "--trials", "3", "--min-time", "0.002", "--no-progress"]
    table = frozen.config_path("cpu", backends.get("cpu").facts().name, tmp_path)

    def entry() -> dict[str, object]:
        (only,) = json.loads(table.read_text())["entries"]
        return only

    def measured(decision: dict[str, object]) -> tuple[object, ...]:
        # what tells two decisions apart: the median alone does not, its samples are single calls
        # read to the nanosecond, and two runs' medians of a 2.8 us kernel were once equal (CI, stop 69)
        return tuple(decision[k] for k in ("median_s", "p20_s", "p80_s", "noise", "speedup_vs_vendor"))

    monkeypatch.setattr(study.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert main([*tune, "--freeze", "--config-dir", str(tmp_path)]) == 0
    quiet = entry()
    monkeypatch.setattr(study.os, "getloadavg", lambda: ((os.cpu_count() or 1) + 2.0, 0.0, 0.0))
    assert main(tune) == 0  # the resume decides again, on a busy host
    (busy,) = [r["final"] for r in study.study_rows(storage)]
    assert study.busy_host(busy) and measured(busy) != measured(quiet)
    caplog.clear()
    assert main(["freeze", "--storage", storage, "--config-dir", str(tmp_path), "--skip-busy"]) == 0
    assert entry() == quiet  # left out, and the table kept the quiet decision
    (warned,) = [r.getMessage() for r in caplog.records if "busy host" in r.getMessage()]
    assert warned.startswith("cpu-") and warned.endswith("not frozen (--skip-busy): the table keeps its entry")
    assert "1-minute load" in warned  # with what made it busy
    assert main(["freeze", "--storage", storage, "--config-dir", str(tmp_path)]) == 0
    assert measured(entry()) == measured(busy)  # without the flag, the busy decision is written


def test_a_decision_taken_with_a_cpu_loop_switch_set_is_never_frozen(
    storage: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """tune --freeze with a LOSSTUNE_CPU_ loop switch set (to the host's own pick, so the loops are
    the ones tuned without it and every run is real) sweeps anew, records the switch on its trials
    and its decision, and leaves the table's entry as it was, with a warning naming the switch;
    `freeze` over the journal later does the same."""
    from kernels.backends import cpu
    from tuner import study

    tune = ["tune", *QUICK, "--storage", storage, "--trials", "3", "--min-time", "0.002", "--no-progress"]
    tune += ["--freeze", "--config-dir", str(tmp_path)]
    table = frozen.config_path("cpu", backends.get("cpu").facts().name, tmp_path)
    assert main(tune) == 0
    before = table.read_text()
    switch = "LOSSTUNE_CPU_APART=" + ("1" if cpu.BACKEND.picks()["APART"] == "on" else "0")
    monkeypatch.setenv(*switch.split("="))
    caplog.clear()
    capsys.readouterr()
    assert main(tune) == 0
    (final,) = [r["final"] for r in study.study_rows(storage)]
    assert final["cpu_forced"] == switch
    assert f"never: loops forced by {switch}" in capsys.readouterr().out  # the summary's frozen column
    assert table.read_text() == before  # not merged: the same table, byte for byte
    (warned,) = [r.getMessage() for r in caplog.records if "not frozen" in r.getMessage()]
    assert warned.startswith("cpu-") and warned.endswith(
        f"decided with {switch} set, not frozen: the table is read without them, and keeps its entry"
    )
    monkeypatch.delenv(switch.split("=")[0])
    caplog.clear()
    assert main(["freeze", "--storage", storage, "--config-dir", str(tmp_path)]) == 0
    assert json.loads(table.read_text())["entries"] == json.loads(before)["entries"]
    assert any(switch in r.getMessage() for r in caplog.records)


def test_summary_names_a_winner_its_fresh_rounds_did_not_confirm() -> None:
    from tuner.cli import _summary

    base = {"case": "mse float32 1048576 none", "trials": 58, "best_candidate": {"tile": 256, "stream": True}}
    read = {"best_candidate_gain": 0.08, "noise": 0.1, "control_ratios": [0.97, 1.06], "chance": 0.008}
    unconfirmed = {**base, **read, "baseline": "default", "tuned": False, "switched": False, "confirmed": False}
    held = {**unconfirmed, "baseline": "incumbent", "tuned": True}
    stood = {**base, **read, "baseline": "default", "tuned": True, "switched": True, "confirmed": True}
    lines = _summary([unconfirmed, held, stood]).splitlines()
    frozen_at = lines[0].index("frozen")
    assert [line[frozen_at:].split("  ")[0] for line in lines[1:]] == [
        "default (unconfirmed)",
        "incumbent (unconfirmed)",
        "tuned",
    ]
    # the control's spread, and the grain of its rounds where they were timed launch by launch
    control_at = lines[0].index("control")
    by_launch = _summary([{**stood, "grain": "launch"}, {**stood, "grain": "run"}]).splitlines()
    assert [line[control_at:].split("  ")[0] for line in lines[1:2] + by_launch[1:]] == [
        "0.97-1.06",
        "0.97-1.06 (launch)",
        "0.97-1.06",
    ]
