"""restamp: a stale entry takes the current kernel hash only where its loops compile to the same IR.

The "old revisions" here are the tree's own sources with one edit each, so the tests compile real
loops from two module copies (a few seconds each) and need no git history."""

from __future__ import annotations

import json
import platform
import sys
from pathlib import Path

import optuna
import pytest
import torch

from kernels import frozen, tiling
from kernels.backends import cpu_loops
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tests.helpers import run_fresh
from tuner import cli
from tuner.freeze import KEY_FIELDS, freeze, write_atomic
from tuner.problems import Case
from tuner.restamp import (
    TARGETS,
    GitHistory,
    Sources,
    Target,
    Verdict,
    _write_restamped,
    as_launched_today,
    git_sources,
    hash_pairs,
    host_tables,
    migrate_hashes,
    normalize_ir,
    restamp_table,
    runnable_here,
    tree_sources,
)
from tuner.study import open_storage

# The tail of cpu_loops' imports: an edit after it shifts every line below, as most edits do.
ANCHOR = "_I32 = ir.IntType(32)\n"


def test_normalize_ir_drops_names_and_strings_but_keeps_the_code() -> None:
    a = (
        '@"_ZN7kernels3old4loopB2v1"= internal constant [9 x i8] c"old.loop\\00"\n'
        "define void @f(ptr %arg.x_31) {\nB12:  ; preds = %B4\n  %.340 = fadd float %v, 1.0\n"
        '  br label %B12\n}\n!7 = distinct !{!7, !"_ZN7kernels3old"}\n'
    )
    b = (
        a.replace("3old4loopB2v1", "14_restamp_new4loopB3v33")
        .replace('c"old.loop\\00"', 'c"restamp_new.loop\\00"')
        .replace("%arg.x_31", "%arg.x_144")
        .replace("B12", "B5238")
        .replace("%.340", "%.343")
        .replace("  ; preds = %B4", "   ; preds = %B4")
        .replace("3old", "14_restamp_new")
    )
    assert normalize_ir(a) == normalize_ir(b)
    assert normalize_ir(a) != normalize_ir(a.replace("1.0", "2.0"))
    assert normalize_ir(a) != normalize_ir(a.replace("fadd", "fsub"))


def test_normalize_ir_numbers_locals_per_function() -> None:
    """Locals are named per function: the same two functions, whose second one's local took another
    name in another load (here: the first one's), normalise alike; globals and named types stay one
    name space, so which function or type a call or a load refers to still shows."""
    f = "define void @f() {\n  %.5 = fadd float %x, 1.0\n  ret void\n}\n"
    g = "define void @g() {\n  %NAME = fmul float %.7, 2.0\n  call void @f()\n  ret void\n}\n"
    assert normalize_ir(f + g.replace("NAME", ".5")) == normalize_ir(f + g.replace("NAME", ".9"))
    assert normalize_ir(f + g) != normalize_ir(f + g.replace("@f()", "@g()"))
    typed = "%T = type {{ i64 }}\n%U = type {{ i32 }}\n"
    typed += "define void @h(ptr %p) {{\n  %a = load %{}, ptr %p\n  ret void\n}}\n"
    assert normalize_ir(typed.format("T")) != normalize_ir(typed.format("U"))


def _mse_entry(config: Tiling, kernel_hash: str, study: str = "cpu-test-mse") -> dict[str, object]:
    case = Case(Op.MSE, torch.float32, (1 << 12,), Reduction.NONE)
    g, x, t = case.inputs("cpu")
    ex = case.phase_one(g, x, t, case.out_like(x), "cpu", config)
    return {
        "op": "mse",
        "dtype": "float32",
        "bucket": 12,
        "grad_kind": "full",
        "layout": "contiguous",
        "reduction_kind": "none",
        "log_target": False,
        "config": config.to_dict(),
        "tuned": True,
        "speedup_vs_default": 1.2,
        "space_hash": ex.space.hash,
        "kernel_hash": kernel_hash,
        "git_commit": "unknown",
        "study": study,
    }


def _table(tmp_path: Path, entries: list[dict[str, object]]) -> Path:
    path = frozen.config_path("cpu", host_tables()[-1], tmp_path)
    write_atomic(path, {"schema_version": frozen.SCHEMA_VERSION, "entries": entries, "common": {}})
    return path


def _edited(loops: str) -> Sources:
    tree = tree_sources()
    assert ANCHOR in tree.loops
    old = Sources("edited", tree.loops.replace(ANCHOR, ANCHOR + loops), tree.ops)
    assert old.kernel_hash("mse") != tree.kernel_hash("mse")
    return old


CONFIG = Tiling(tile=1024, cores=2, variant=Variant.FLAT, prefetch=1)


def test_an_edit_that_leaves_the_loops_alone_restamps_the_entry_and_its_study(tmp_path: Path) -> None:
    old = _edited("\n\ndef _unused_helper(a):\n    return a + 1\n\n\nUNUSED_LIMIT = 12345\n")
    path = _table(tmp_path, [_mse_entry(CONFIG, old.kernel_hash("mse"))])
    storage = str(tmp_path / "journal.log")
    study = optuna.create_study(study_name="cpu-test-mse", storage=open_storage(storage))
    entry = _mse_entry(CONFIG, old.kernel_hash("mse"))
    for attr in (*KEY_FIELDS, "log_target", "space_hash", "case"):
        study.set_user_attr(attr, entry.get(attr))
    study.set_user_attr("backend", "cpu")
    study.set_user_attr("device", host_tables()[-1])
    timings = {"median_s": 1e-4, "p20_s": 1e-4, "p80_s": 1e-4, "noise": 0.01, "trial": 3}
    final = {"config": CONFIG.to_dict(), "kernel_hash": old.kernel_hash("mse"), "tuned": True, **timings}
    study.set_user_attr("final", final | {"speedup_vs_default": 1.2, "speedup_vs_vendor": 2.0})
    asked = []

    def find(op: str, wanted: str, hint: str) -> Sources | None:
        asked.append((op, wanted, hint))
        return old if wanted == old.kernel_hash(op) else None

    outcomes = restamp_table(path, storage=storage, find_sources=find)

    (outcome,) = [o for o in outcomes if o.where.startswith("entries")]
    assert outcome.verdict is Verdict.SAME and "1 loop(s) compile the same" in outcome.detail  # the parallel flat
    assert asked == [("mse", old.kernel_hash("mse"), "unknown")]
    entry = json.loads(path.read_text())["entries"][0]
    assert entry["kernel_hash"] == frozen.kernel_hash("cpu", "mse")
    assert entry["restamped"]["from"] == old.kernel_hash("mse") and entry["restamped"]["source"] == "edited"
    assert entry["restamped"]["compiled_for"] == host_tables()[0]
    final = optuna.load_study(study_name="cpu-test-mse", storage=open_storage(storage)).user_attrs["final"]
    assert final["kernel_hash"] == frozen.kernel_hash("cpu", "mse")  # a later freeze writes it again
    assert final["same_kernels"] == [old.kernel_hash("mse")]  # and a resume counts its trials (study.Sweep)
    assert final["restamped"] == entry["restamped"]
    # and a freeze from the journal writes the entry with its new hash and its note
    freeze(storage, "cpu", host_tables()[-1], root=tmp_path)
    (refrozen,) = json.loads(path.read_text())["entries"]
    assert refrozen["kernel_hash"] == entry["kernel_hash"] and refrozen["restamped"] == entry["restamped"]
    # and the lookup takes it again
    case = Case(Op.MSE, torch.float32, (1 << 12,), Reduction.NONE)
    g, x, t = case.inputs("cpu")
    ex = case.phase_one(g, x, t, case.out_like(x), "cpu")
    frozen.reset()
    assert frozen.lookup("cpu", host_tables()[-1], ex.key, ex.space, tmp_path)[0] == CONFIG


def test_an_edit_of_the_loop_keeps_the_entry_stale_and_the_table_untouched(tmp_path: Path) -> None:
    # The prefetch hint's locality (3: prefetcht0) is in every contiguous loop's body.
    tree = tree_sources()
    hint = "ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)"
    assert tree.loops.count(hint) == 1
    old = Sources("edited", tree.loops.replace(hint, hint.replace("_I32, 3", "_I32, 2")), tree.ops)
    path = _table(tmp_path, [_mse_entry(CONFIG, old.kernel_hash("mse"))])
    before = path.read_bytes()

    outcomes = restamp_table(path, storage=str(tmp_path / "j.log"), find_sources=lambda op, h, c: old)

    (entry,) = [o for o in outcomes if o.where.startswith("entries")]
    assert entry.verdict is Verdict.CHANGED and "IR differs" in entry.detail
    assert path.read_bytes() == before


def test_an_entry_whose_source_is_not_found_stays_stale(tmp_path: Path) -> None:
    path = _table(tmp_path, [_mse_entry(CONFIG, "0123456789abcdef")])
    before = path.read_bytes()
    outcomes = restamp_table(path, find_sources=lambda op, h, c: None)
    assert [o.verdict for o in outcomes] == [Verdict.NO_SOURCE]
    assert path.read_bytes() == before


def test_a_current_entry_is_left_alone_without_compiling(tmp_path: Path) -> None:
    """Current by the canonical hash, or by this Python's legacy one (a table frozen before it)."""
    legacy = _mse_entry(CONFIG, frozen.legacy_kernel_hash("cpu", "mse")) | {"bucket": 14}
    path = _table(tmp_path, [_mse_entry(CONFIG, frozen.kernel_hash("cpu", "mse")), legacy])
    before = path.read_bytes()

    def never(op: str, wanted: str, hint: str) -> Sources | None:
        raise AssertionError("a current entry needs no old source")

    outcomes = restamp_table(path, find_sources=never)
    assert [(o.where, o.verdict) for o in outcomes] == [
        ("entries[0]", Verdict.CURRENT),
        ("entries[1]", Verdict.CURRENT),
        ("common[mse]", Verdict.CURRENT),  # two wins of one config
    ]
    assert path.read_bytes() == before


def test_restamp_refuses_a_table_this_host_does_not_compile_for(tmp_path: Path) -> None:
    path = frozen.config_path("cpu", "riscv64-9t", tmp_path)
    write_atomic(path, {"schema_version": frozen.SCHEMA_VERSION, "entries": [], "common": {}})
    with pytest.raises(ValueError, match=r"table: this host compiles for .* got riscv64-9t"):
        restamp_table(path)
    broken = frozen.config_path("cpu", host_tables()[-1], tmp_path)
    broken.write_text("{not json")
    with pytest.raises(ValueError, match=r"table: expected a readable JSON table"):
        restamp_table(broken)
    assert broken.read_text() == "{not json"


def test_cli_restamp_dry_run_and_a_missing_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _table(tmp_path, [_mse_entry(CONFIG, frozen.kernel_hash("cpu", "mse"))])
    assert cli.main(["restamp", "--dry-run", str(path)]) == 0
    assert "1 current" in capsys.readouterr().out
    assert cli.main(["restamp", str(tmp_path / "cpu" / "absent.json")]) == 2
    assert "tables: expected an existing CPU or CUDA table" in capsys.readouterr().err


def test_a_transposed_entry_compiles_its_own_walk_and_restamps(tmp_path: Path) -> None:
    """The transposed walk (one compiled loop per tile) with a 16-bit out: the narrow formula's loops."""
    old = _edited("\n\nUNUSED_LIMIT = 12345\n")
    walk = Tiling(tile=tiling.CPU_TRANSPOSED_TILE, cores=2, variant=Variant.STRIDED, stream=True)
    entry = _mse_entry(CONFIG, old.kernel_hash("kl_div")) | {
        "op": "kl_div",
        "dtype": "float16",
        "grad_kind": "scalar",
        "reduction_kind": "reduced",
        "layout": "transposed",
        "config": walk.to_dict(),
    }
    path = _table(tmp_path, [entry])
    (outcome,) = restamp_table(path, storage=str(tmp_path / "j.log"), find_sources=lambda op, h, c: old)
    assert outcome.verdict is Verdict.SAME, outcome.detail
    assert "1 loop(s)" in outcome.detail  # the one walk: kl_div narrow transposed[4096] parallel
    assert json.loads(path.read_text())["entries"][0]["kernel_hash"] == frozen.kernel_hash("cpu", "kl_div")


def test_a_reduce_entry_compiles_its_own_walk_through_the_summed_case_and_restamps(tmp_path: Path) -> None:
    """KL's sum back to a smaller input (the planner's reduce layout): the tuner's summed case is its
    probe, so an entry of it is compared walk for walk like any other. This one holds the old
    revision's legacy hash (a table frozen before the canonical hash): it is found by it, and
    takes the canonical hash of the tree."""
    old = _edited("\n\nUNUSED_LIMIT = 12345\n")
    walk = Tiling(tile=4096, cores=2, variant=Variant.REDUCE)
    entry = _mse_entry(CONFIG, old.legacy_kernel_hash("kl_div")) | {
        "op": "kl_div",
        "grad_kind": "scalar",
        "reduction_kind": "reduced",
        "layout": "reduce",
        "config": walk.to_dict(),
    }
    path = _table(tmp_path, [entry])
    find = lambda op, h, c: old if h in old.hashes(op) else None  # noqa: E731
    (outcome,) = restamp_table(path, storage=str(tmp_path / "j.log"), find_sources=find)
    assert outcome.verdict is Verdict.SAME, outcome.detail
    (written,) = json.loads(path.read_text())["entries"]
    assert written["kernel_hash"] == frozen.kernel_hash("cpu", "kl_div")
    assert written["restamped"]["from"] == old.legacy_kernel_hash("kl_div") != old.kernel_hash("kl_div")


# The last commit whose transposed walks were keyed by tile alone (before Tiling.transpose_row).
BEFORE_ROWS = "4671d27723fe1a91d8fa18751854fa0aa256de55"


def test_a_transposed_entry_frozen_before_transpose_row_restamps_against_the_tree(tmp_path: Path) -> None:
    """That revision's walks were keyed by tile; restamp launches them under today's key (tile, 0)
    (restamp.as_launched_today), and the host's own rows compile to the same walk as then."""
    old = git_sources(BEFORE_ROWS)
    if old is None:
        pytest.skip(f"no git history with {BEFORE_ROWS[:7]}")
    walk = Tiling(tile=tiling.CPU_TRANSPOSED_TILE, cores=2, variant=Variant.STRIDED)
    entry = _mse_entry(CONFIG, old.kernel_hash("mse")) | {"layout": "transposed", "config": walk.to_dict()}
    path = _table(tmp_path, [entry])
    (outcome,) = restamp_table(path, storage=str(tmp_path / "j.log"), find_sources=lambda op, h, c: old)
    assert outcome.verdict is Verdict.SAME, outcome.detail
    assert json.loads(path.read_text())["entries"][0]["kernel_hash"] == frozen.kernel_hash("cpu", "mse")


# The last commit with one strided walk for every kind of innermost run (before cpu_loops.StridedRun).
BEFORE_RUNS = "1a083f018757fb24f5bb0e93bedb1f8e8312fb81"


def test_a_broadcast_entry_frozen_before_the_strided_builds_stays_stale(tmp_path: Path) -> None:
    """That revision's strided walk held all three run loops in one function; today's build for
    the run kind compiles to other IR (the point of the split), so the entry is left to re-tune."""
    old = git_sources(BEFORE_RUNS)
    if old is None:
        pytest.skip(f"no git history with {BEFORE_RUNS[:7]}")
    walk = Tiling(tile=4096, cores=2, variant=Variant.STRIDED)
    entry = _mse_entry(CONFIG, old.kernel_hash("mse")) | {"layout": "strided", "config": walk.to_dict()}
    path = _table(tmp_path, [entry])
    (outcome,) = restamp_table(path, storage=str(tmp_path / "j.log"), find_sources=lambda op, h, c: old)
    assert outcome.verdict is Verdict.CHANGED, outcome.detail
    assert json.loads(path.read_text())["entries"][0]["kernel_hash"] == old.kernel_hash("mse")


def test_plumbing_without_compiling_old_walks_keyed_by_tile_are_launched_as_tile_and_row_zero() -> None:
    """Plumbing only: a stand-in module whose make_cpu_kernels returns walks keyed by tile, one
    strided walk, one reduce walk and deferred walks keyed by (tile, row), in a class of its own
    without today's reduce_along field."""
    import dataclasses
    import types as pytypes

    pair = ("serial", "parallel")
    names = ("flat", "scalar_grad", "strided", "transposed", "reduce", "transposed_in", "transposed_deferred")
    old_kernels = dataclasses.make_dataclass("CpuKernels", names, frozen=True)

    def old_make(value: object, compute_bound: bool = False) -> object:
        walks = {4096: ("w", "W"), 16384: ("v", "V")}
        deferred = {(4096, 1): ("d", "D")}
        return old_kernels(pair, pair, pair, walks, ("r", "R"), {}, deferred)

    old = pytypes.ModuleType("old_loops")
    old.make_cpu_kernels = old_make  # type: ignore[attr-defined]
    today = as_launched_today(old)
    launched = today.make_cpu_kernels(None)
    assert launched.transposed == {(4096, 0): ("w", "W"), (16384, 0): ("v", "V")}
    assert launched.strided == dict.fromkeys(cpu_loops.StridedRun, pair)  # one walk for every kind of run
    # one deferred walk for every kind of pass (a)'s runs
    assert launched.transposed_deferred == {(4096, 1, kind): ("d", "D") for kind in cpu_loops.StridedRun}
    # the one reduce walk for every kind of lanes, and for the geometries summed along their summed dims
    assert launched.reduce == dict.fromkeys(cpu_loops.StridedRun, ("r", "R"))
    assert launched.reduce_along == {False: ("r", "R"), True: ("r", "R")}
    assert isinstance(launched, cpu_loops.CpuKernels)
    assert today.TRANSPOSE_ROWS == (0,) and today.reduce_run is cpu_loops.reduce_run
    assert old.make_cpu_kernels is old_make  # a copy: old is as it was
    assert as_launched_today(today) is today and as_launched_today(cpu_loops) is cpu_loops
    assert set(cpu_loops.make_cpu_kernels(lambda g, x, t, c: g).transposed) == {
        (tile, row) for tile in cpu_loops.TRANSPOSED_TILES for row in cpu_loops.TRANSPOSE_ROWS
    }
    assert set(cpu_loops.make_cpu_kernels(lambda g, x, t, c: g).transposed_deferred) == {
        (tile, row, kind)
        for tile in cpu_loops.TRANSPOSED_TILES
        for row in cpu_loops.TRANSPOSE_ROWS
        for kind in cpu_loops.StridedRun
    }


def test_git_history_finds_the_revision_of_a_kernel_hash() -> None:
    head = git_sources("HEAD")
    if head is None:
        pytest.skip("not a git checkout")
    history = GitHistory()
    for op in ("mse", "l1", "kl_div"):
        found = history(op, head.kernel_hash(op), "unknown")  # no hint: the kernel files' log
        assert found is not None and found.kernel_hash(op) == head.kernel_hash(op)
        legacy = history(op, head.legacy_kernel_hash(op), "unknown")  # a table frozen before the canonical hash
        assert legacy is not None and legacy.kernel_hash(op) == head.kernel_hash(op)
    assert history("mse", "0" * 16, "HEAD") is None
    assert git_sources("0" * 40) is None


# The bfloat16 store's gate in cpu_loops: vcvtneps2bf16 where the CPU compiled for has AVX512-BF16.
BF16_GATE = 'HAS_BF16 = _host_has("avx512bf16", "LOSSTUNE_CPU_BF16")'


def test_a_target_cpu_restamps_where_the_edit_is_behind_a_feature_it_lacks(tmp_path: Path) -> None:
    """An "old revision" without the AVX512-BF16 store: compiled for the AVX2 tier's Zen 3 the
    bfloat16 loops are as before, so that tier's table restamps from this host; compiled for this
    host they are as before only where it lacks AVX512-BF16."""
    try:
        znver3 = runnable_here(TARGETS["znver3"])
    except ValueError as e:
        pytest.skip(str(e))
    tree = tree_sources()
    assert BF16_GATE in tree.loops
    old = Sources("no-bf16", tree.loops.replace(BF16_GATE, "HAS_BF16 = False"), tree.ops)
    entry = _mse_entry(CONFIG, old.kernel_hash("mse")) | {"dtype": "bfloat16"}
    names = host_tables(znver3)
    assert names[0].split("-")[1:3] == ["avx2", "znver3"] and names[1].split("-")[1] == "avx2", names
    avx2 = frozen.config_path("cpu", names[-1], tmp_path)
    write_atomic(avx2, {"schema_version": frozen.SCHEMA_VERSION, "entries": [entry], "common": {}})
    journal = str(tmp_path / "j.log")
    outcomes = restamp_table(avx2, storage=journal, find_sources=lambda op, h, c: old, to=znver3)
    (outcome,) = [o for o in outcomes if o.where.startswith("entries")]
    assert outcome.verdict is Verdict.SAME, outcome.detail
    assert json.loads(avx2.read_text())["entries"][0]["restamped"]["compiled_for"] == names[0]
    here = _table(tmp_path, [entry])
    outcomes = restamp_table(here, storage=journal, find_sources=lambda op, h, c: old)
    (outcome,) = [o for o in outcomes if o.where.startswith("entries")]
    assert outcome.verdict is (Verdict.CHANGED if cpu_loops.HAS_BF16 else Verdict.SAME), outcome.detail


def test_the_zen_5_target_reads_its_own_table_and_takes_the_gates_named_for_it() -> None:
    """``--target znver5`` restamps the Zen 5's table and the AVX-512 tier's, and its workers build
    the loops a Zen 5 builds: the checked twin, which the gates give that CPU by name
    (cpu_loops._CHECKED_CPUS) and the Zen 4, with the same features, not."""
    assert host_tables(TARGETS["znver5"]) == ("x86_64-avx512-znver5-2t", "x86_64-avx512-2t")
    code = "from kernels.backends import cpu_loops as c; print(c.target_cpu(), c.HAS_SCALEF, c.CHECKED_SCALE)"
    assert run_fresh(code, TARGETS["znver5"].env()) == "znver5 True True"
    assert run_fresh(code, TARGETS["znver4"].env()) == "znver4 True False"


def test_the_xeon_target_reads_its_own_table_and_takes_the_walk_knobs_not_the_fused_walk() -> None:
    """``--target rocketlake`` (LLVM's name for the lent Xeons) restamps the Xeon's chip table and
    the AVX-512 tier's, and its workers build the walks a Xeon builds: half rows offered (the walk
    knobs, cpu_loops._WALK_KNOB_CPUS), the fused walk not; ``sapphirerapids``, with the same
    features, is offered neither."""
    assert host_tables(TARGETS["rocketlake"]) == ("x86_64-avx512-rocketlake-2t", "x86_64-avx512-2t")
    code = "from kernels.backends import cpu_loops as c; print(c.target_cpu(), c.TRANSPOSE_ROWS, c.FUSED)"
    assert run_fresh(code, TARGETS["rocketlake"].env()) == "rocketlake (0, 32) False"
    assert run_fresh(code, TARGETS["sapphirerapids"].env()) == "sapphirerapids (0,) False"


def test_compile_only_compiles_each_call_and_never_runs_it() -> None:
    """What a worker does for a target this host cannot run: a dispatcher call compiles for its
    arguments' types, as a first call does, and returns without running (nothing is written).
    In a fresh process: the patch is process-wide."""
    code = (
        "import numpy as np\n"
        "from numba import njit\n"
        "from tuner.restamp import _compile_only\n"
        "@njit\n"
        "def fill(a, v, n):\n"
        "    for i in range(n):\n"
        "        a[i] = v\n"
        "_compile_only()\n"
        "a = np.zeros(4, np.float32)\n"
        "assert fill(a, 7.0, 4) is None and (a == 0).all()\n"
        "print(fill.signatures, 'define' in fill.inspect_llvm(fill.signatures[0]))\n"
    )
    assert run_fresh(code, {}) == "[(Array(float32, 1, 'C', False, aligned=True), float64, int64)] True"


def test_an_avx512_target_restamps_from_any_host(tmp_path: Path) -> None:
    """The Zen 4 compiled for from this host, whatever its features (an AVX2 host compiles without
    running): an old revision that is the tree restamps a bfloat16 entry, one without the
    AVX512-BF16 store (a gate the Zen 4 takes) leaves it stale."""
    znver4 = TARGETS["znver4"]
    tree = tree_sources()
    no_bf16 = Sources("no-bf16", tree.loops.replace(BF16_GATE, "HAS_BF16 = False"), tree.ops)
    names = host_tables(znver4)
    assert names == ("x86_64-avx512-znver4-2t", "x86_64-avx512-2t"), names
    table = frozen.config_path("cpu", names[0], tmp_path)
    journal = str(tmp_path / "j.log")
    for old, verdict in ((_edited("X = 1\n"), Verdict.SAME), (no_bf16, Verdict.CHANGED)):
        entry = _mse_entry(CONFIG, old.kernel_hash("mse")) | {"dtype": "bfloat16"}
        write_atomic(table, {"schema_version": frozen.SCHEMA_VERSION, "entries": [entry], "common": {}})
        outcomes = restamp_table(table, storage=journal, find_sources=lambda op, h, c, old=old: old, to=znver4)
        (outcome,) = [o for o in outcomes if o.where.startswith("entries")]
        assert outcome.verdict is verdict, (old.label, outcome.detail)


def test_runnable_here_names_the_features_this_host_lacks_and_the_cli_names_an_unknown_target(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """runnable_here says which target and which of its features this host lacks (the tests' skip
    reason; restamp itself compiles without running there, see the compile-only tests above); the
    CLI refuses a target it does not know, naming the ones it does."""
    with pytest.raises(ValueError, match="got imaginary with no-such-feature, which this host lacks"):
        runnable_here(Target("imaginary", "+no-such-feature,-avx512f"))
    assert cli.main(["restamp", "--dry-run", "--target", "pentium"]) == 2
    expected = "target: expected one of znver3, znver4, sapphirerapids, znver5, rocketlake, got 'pentium'"
    assert expected in capsys.readouterr().err
    # The help names them by hand (building the parser must not import the compilers TARGETS sits
    # beside): it names each, in TARGETS' order.
    with pytest.raises(SystemExit):
        cli.main(["restamp", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"compile for this CPU instead of the host ({', '.join(TARGETS)})" in help_text


# ---- migrate_hashes: legacy kernel hashes to the canonical one ----------------------------------------


def _study(storage: str, entry: dict[str, object], device: str) -> None:
    """A finished study in ``storage`` whose final decision is ``entry``'s (as freeze reads it)."""
    study = optuna.create_study(study_name=str(entry["study"]), storage=open_storage(storage))
    for attr in (*KEY_FIELDS, "log_target", "space_hash", "case"):
        study.set_user_attr(attr, entry.get(attr))
    study.set_user_attr("backend", "cpu")
    study.set_user_attr("device", device)
    timings = {"median_s": 1e-4, "p20_s": 1e-4, "p80_s": 1e-4, "noise": 0.01, "trial": 3, "speedup_vs_vendor": 2.0}
    final = {"config": entry["config"], "kernel_hash": entry["kernel_hash"], "tuned": True, **timings}
    study.set_user_attr("final", final | {"speedup_vs_default": entry["speedup_vs_default"]})


def _finals(storage: str) -> dict[str, str]:
    summaries = optuna.get_all_study_summaries(open_storage(storage), include_best_trial=False)
    return {s.study_name: s.user_attrs["final"]["kernel_hash"] for s in summaries}


def _migration_case(tmp_path: Path) -> tuple[Path, str, Sources, dict[str, str]]:
    """A table and journal of every kind: the tree's legacy hash (entries 0 and 3, common mse),
    its canonical hash (entry 1), the legacy hash of other sources (entry 2, common l1: stale), and
    a study of another device with the tree's legacy hash."""
    tree = tree_sources()
    other = _edited("\n\nUNUSED_LIMIT = 12345\n")
    hashes = {
        "legacy": tree.legacy_kernel_hash("mse"),
        "canonical": tree.kernel_hash("mse"),
        "stale": other.legacy_kernel_hash("mse"),
        "l1": tree.legacy_kernel_hash("l1"),
    }
    assert len(set(hashes.values())) == 4
    entries = [
        _mse_entry(CONFIG, hashes["legacy"], "cpu-m-0"),
        _mse_entry(CONFIG, hashes["canonical"], "cpu-m-1") | {"bucket": 13},
        _mse_entry(CONFIG, hashes["stale"], "cpu-m-2") | {"bucket": 14},
        _mse_entry(CONFIG, hashes["l1"], "cpu-m-3") | {"op": "l1"},
    ]
    for entry in entries:
        entry["case"] = f"{entry['op']} {entry['bucket']}"
    common = {
        "mse": {"op": "mse", "config": CONFIG.to_dict(), "kernel_hash": hashes["legacy"]},
        "l1": {"op": "l1", "config": CONFIG.to_dict(), "kernel_hash": other.legacy_kernel_hash("l1")},
    }
    path = frozen.config_path("cpu", "x86_64-test-2t", tmp_path / "configs")
    write_atomic(path, {"schema_version": frozen.SCHEMA_VERSION, "entries": entries, "common": common})
    storage = str(tmp_path / "journal.log")
    for entry in entries:
        _study(storage, entry, path.stem)
    _study(storage, entries[0] | {"study": "cpu-elsewhere"}, "x86_64-elsewhere-2t")
    return path, storage, tree, hashes


def test_migrate_hashes_moves_exactly_the_current_legacy_entries_and_their_studies(tmp_path: Path) -> None:
    path, storage, tree, hashes = _migration_case(tmp_path)
    before = json.loads(path.read_text())
    stale_before = frozen.stale_by_source("cpu", frozen.load("cpu", path.stem, path.parent.parent))
    assert stale_before == 1  # entry 2: the legacy entries are current here already

    done = migrate_hashes(path, tree, storage=storage)

    assert (done.entries, done.common, done.canonical, done.studies) == (2, 1, 1, 2)
    assert done.left == ("entries[2] mse float32 2^14 full contiguous", "common[l1]")
    assert done.python == platform.python_version()
    after = json.loads(path.read_text())
    assert [e["kernel_hash"] for e in after["entries"]] == [
        hashes["canonical"],
        hashes["canonical"],
        hashes["stale"],  # stale stays stale
        tree.kernel_hash("l1"),
    ]
    assert after["common"]["mse"]["kernel_hash"] == hashes["canonical"]
    assert after["common"]["l1"] == before["common"]["l1"]
    for old, new in zip(before["entries"], after["entries"], strict=True):  # nothing else changed
        assert old | {"kernel_hash": ""} == new | {"kernel_hash": ""}
    frozen.reset()
    assert frozen.stale_by_source("cpu", frozen.load("cpu", path.stem, path.parent.parent)) == stale_before
    assert _finals(storage) == {
        "cpu-m-0": hashes["canonical"],
        "cpu-m-1": hashes["canonical"],
        "cpu-m-2": hashes["stale"],
        "cpu-m-3": tree.kernel_hash("l1"),
        "cpu-elsewhere": hashes["legacy"],  # another device's table: not this migration's
    }
    # a later freeze from the journal writes the same hashes
    refrozen, _ = freeze(storage, "cpu", path.stem, root=tmp_path / "refrozen")
    by_study = {e["study"]: e["kernel_hash"] for e in json.loads(refrozen.read_text())["entries"]}
    assert by_study == {e["study"]: e["kernel_hash"] for e in after["entries"]}
    # and a second run finds nothing to do
    written = path.read_bytes()
    again = migrate_hashes(path, tree, storage=storage)
    assert (again.entries, again.common, again.canonical, again.studies) == (0, 0, 4, 0)
    assert path.read_bytes() == written


def test_migrate_hashes_dry_run_writes_nothing(tmp_path: Path) -> None:
    path, storage, tree, _ = _migration_case(tmp_path)
    table, finals = path.read_bytes(), _finals(storage)
    done = migrate_hashes(path, tree, storage=storage, dry_run=True)
    assert (done.entries, done.common, done.studies) == (2, 1, 2)
    assert path.read_bytes() == table and _finals(storage) == finals


def _fake_python(tmp_path: Path, name: str, body: str) -> str:
    """An "interpreter" that runs ``body`` whatever it is asked (kernels/codehash.py's part)."""
    script = tmp_path / name
    script.write_text(f"#!{sys.executable}\nimport json, sys\n{body}\n")
    script.chmod(0o755)
    return str(script)


def test_migrate_hashes_maps_another_pythons_legacy_hashes(tmp_path: Path) -> None:
    """A table hashed under another minor (the H200's, under 3.12): that minor's interpreter gives
    its legacy hashes. Here a stand-in whose legacy hashes are this Python's reversed."""
    path, storage, tree, hashes = _migration_case(tmp_path)
    body = (
        f"sys.path.insert(0, {str(Path(frozen.__file__).parent)!r})\nimport codehash\n"
        "s = json.load(sys.stdin)\n"
        "canonical = {op: codehash.source_hash(s['loops'], t) for op, t in s['ops'].items()}\n"
        "legacy = {op: codehash.legacy_source_hash(s['loops'], t)[::-1] for op, t in s['ops'].items()}\n"
        "json.dump({'python': '3.12.3', 'canonical': canonical, 'legacy': legacy}, sys.stdout)"
    )
    other = _fake_python(tmp_path, "python3.12", body)
    assert hash_pairs(tree, other)["mse"] == (hashes["legacy"][::-1], hashes["canonical"])
    table = json.loads(path.read_text())
    table["entries"][0]["kernel_hash"] = hashes["legacy"][::-1]
    write_atomic(path, table)
    done = migrate_hashes(path, tree, python=other, storage=storage)
    assert done.python == "3.12.3"
    # entry 0 held the other minor's hash; entry 3 and the studies hold this Python's: not that one's
    assert (done.entries, done.common, done.studies) == (1, 0, 0)
    assert [e["kernel_hash"] for e in json.loads(path.read_text())["entries"]][:1] == [hashes["canonical"]]


def test_hash_pairs_under_an_interpreter_is_the_in_process_answer(tmp_path: Path) -> None:
    tree = tree_sources()
    assert hash_pairs(tree, sys.executable) == hash_pairs(tree)
    assert set(hash_pairs(tree)) == {op.value for op in Op}


def test_migrate_hashes_leaves_the_table_and_journal_as_they_were_on_error(tmp_path: Path) -> None:
    path, storage, tree, _ = _migration_case(tmp_path)
    table, journal = path.read_bytes(), Path(storage).read_bytes()
    differs = _fake_python(
        tmp_path,
        "differs",
        "s = json.load(sys.stdin)\nops = s['ops']\n"
        "json.dump({'python': '3.99.0', 'canonical': dict.fromkeys(ops, '0' * 16), 'legacy': dict.fromkeys(ops, 'x')},"
        " sys.stdout)",
    )
    fails = _fake_python(tmp_path, "fails", "sys.exit('no such thing')")
    for python, why in (
        (str(tmp_path / "absent"), "python: expected an interpreter"),
        (fails, "no such thing"),
        (differs, "the canonical hash is not version-independent"),
    ):
        with pytest.raises(ValueError, match=why):
            migrate_hashes(path, tree, python=python, storage=storage)
        assert path.read_bytes() == table and Path(storage).read_bytes() == journal
    path.write_text('{"schema_version": 99, "entries": []}')
    with pytest.raises(ValueError, match="table: expected schema_version 1"):
        migrate_hashes(path, tree, storage=storage)
    assert path.read_text() == '{"schema_version": 99, "entries": []}'


# The commit the H200's table was tuned on (its sources, triton_loops.py's and the ops', are b24479a's).
# The table was frozen there under Python 3.12.3 with the legacy hash: these. Their canonical hashes
# are the same under pyenv's 3.10.13, 3.11.7, 3.12.1 and 3.13.0, and the H200's 3.12.3 wrote them too
# when it later froze entries of the same sources with the canonical hash.
H200_SOURCES = "bc86a11"
H200_LEGACY_312 = {"mse": "353cc4e4866a5594", "l1": "d721cee4a6b386d6", "kl_div": "e3fa240c72a4f1a6"}
H200_CANONICAL = {"mse": "daad5598a87b6214", "l1": "ad408f6e291c98f2", "kl_div": "6a7f0b0599d77ef2"}


def test_the_h200_tables_sources_hash_as_they_did_there() -> None:
    """The canonical hashes of the sources the H200's table was tuned on are pinned; a Python 3.12
    here (pyenv's) gives the legacy hashes the table held, and hash_pairs pairs them."""
    sources = git_sources(H200_SOURCES, "cuda")
    if sources is None:
        pytest.skip(f"no git history with {H200_SOURCES}")
    assert {op: sources.kernel_hash(op) for op in H200_CANONICAL} == H200_CANONICAL
    python = next(iter(sorted(Path.home().glob(".pyenv/versions/3.12*/bin/python"))), None)
    if python is None:
        pytest.skip("no Python 3.12 here to give its legacy hashes")
    pairs = hash_pairs(sources, str(python))
    assert {op: pairs[op] for op in H200_LEGACY_312} == {
        op: (H200_LEGACY_312[op], H200_CANONICAL[op]) for op in H200_LEGACY_312
    }


def test_a_journal_it_cannot_read_stops_a_restamp_before_any_compile_and_leaves_the_table(tmp_path: Path) -> None:
    """The journal is opened before the entries are compared (each comparison compiles for seconds
    to minutes), so a mistyped or damaged one costs seconds and the table stays as it was."""
    old = _edited("\n\nUNUSED_LIMIT = 12345\n")
    path = _table(tmp_path, [_mse_entry(CONFIG, old.kernel_hash("mse"))])
    before = path.read_bytes()
    notes = tmp_path / "notes.log"
    notes.write_text("some notes about tuning\n")

    def find(op: str, wanted: str, hint: str) -> Sources | None:
        raise AssertionError("an entry was looked up before the journal was opened")

    with pytest.raises(ValueError, match="expected an optuna journal"):
        restamp_table(path, storage=str(notes), find_sources=find)
    assert path.read_bytes() == before and notes.read_text() == "some notes about tuning\n"


def test_a_restamp_with_no_journal_yet_creates_none(tmp_path: Path) -> None:
    """A journal not there holds no study to update: restamp neither needs one nor leaves an empty one."""
    old = _edited("\n\nUNUSED_LIMIT = 12345\n")
    path = _table(tmp_path, [_mse_entry(CONFIG, old.kernel_hash("mse"))])
    storage = tmp_path / "tuning" / "journal.log"
    (outcome,) = [
        o for o in restamp_table(path, storage=str(storage), find_sources=lambda *_: None) if o.where == "entries[0]"
    ]
    assert outcome.verdict is Verdict.NO_SOURCE
    assert not storage.exists() and not storage.parent.exists()


def test_restamped_entries_go_into_the_table_as_it_stands_at_the_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """restamp compares for seconds to minutes after reading the table; it wrote back what it had
    read, so a freeze meanwhile lost its entries. Under the table's lock it reads the table again:
    another entry a freeze added stays, and an entry a freeze replaced is not restamped."""
    old = _edited("\n\nUNUSED_LIMIT = 12345\n")
    stale = _mse_entry(CONFIG, old.kernel_hash("mse"))
    now = frozen.kernel_hash("cpu", "mse")
    restamped = stale | {"kernel_hash": now, "restamped": {"from": old.kernel_hash("mse"), "source": "edited"}}
    added = _mse_entry(CONFIG, now) | {"bucket": 14}  # frozen while the restamp compared
    path = _table(tmp_path, [stale, added])
    assert _write_restamped(path, [restamped]) == [restamped]
    assert json.loads(path.read_text())["entries"] == [restamped, added]
    replaced = _mse_entry(Tiling(tile=4096, cores=2, variant=Variant.FLAT, prefetch=1), now)  # another decision
    path = _table(tmp_path, [replaced])
    with caplog.at_level("WARNING", logger="losstune"):
        assert _write_restamped(path, [restamped]) == []
    assert json.loads(path.read_text())["entries"] == [replaced]
    assert "changed in" in caplog.text and "not restamped" in caplog.text
