"""Restamping CUDA tables by Triton's IR (tuner.restamp_triton), compiled here for sm_90 without a
GPU: an edit inside one op's branch of triton_loops.py leaves every other op's kernels the same
TTIR (restamped) and changes that op's (left stale), and a table of an unknown GPU is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernels import backends, frozen
from tuner.restamp import Sources, Verdict, restamp_table, tree_sources
from tuner.restamp_triton import TritonComparer, normalize_ttir  # imports triton only when it compiles

SM90 = (90, 32)
_CONFIG = {"variant": "flat", "tile": 1024, "cores": 528, "num_warps": 4}


@pytest.fixture(scope="module", autouse=True)
def _interpreter_loaded_first() -> None:
    # The suite loads the interpreter backend (TRITON_INTERPRET=1) before these run; so do these,
    # so that a restamp in such a process is what is tested.
    ok, why = backends.probe("triton-interpret")
    if not ok:
        pytest.skip(why)


def _entry(op: str, dtype: str, old: Sources, *, log_target: bool = False) -> dict[str, object]:
    name = "kl_div" if op == "kl_div-log" else op
    return {
        "op": name,
        "log_target": log_target,
        "dtype": dtype,
        "layout": "contiguous",
        "grad_kind": "full",
        "reduction_kind": "none",
        "bucket": 24,
        "config": _CONFIG,
        "kernel_hash": old.kernel_hash(name),
        "git_commit": "unknown",
        "study": f"cuda-test-{op}-{dtype}",
        "tuned": True,
        "median_s": 1e-4,
        "speedup_vs_default": 1.1,
    }


def _edited(tree: Sources, old_text: str, new_text: str) -> Sources:
    assert old_text in tree.loops
    return Sources("edited", tree.loops.replace(old_text, new_text), tree.ops)


def test_ttir_is_compared_without_its_source_locations() -> None:
    text = '#loc = loc("a.py":3:0)\nmodule {\n  %0 = arith.addf %a, %b : f32 loc(#loc1)\n} loc(#loc)\n'
    text += '#loc1 = loc("a.py":9:4)\n'
    assert normalize_ttir(text) == "module {\n  %0 = arith.addf %a, %b : f32\n}"


def test_an_edit_in_one_op_s_branch_changes_that_op_only() -> None:
    tree = tree_sources("cuda")
    # _kl_log's clamp moved: KL log_target's kernels change, the others compile as before
    old = _edited(tree, "tl_ = tl.maximum(t, -194.0)", "tl_ = tl.maximum(t, -195.0)")
    comparer = TritonComparer(tree, SM90)
    verdict, detail = comparer.compare(_entry("mse", "float32", old), old)
    assert verdict is Verdict.SAME, detail
    verdict, detail = comparer.compare(_entry("kl_div-log", "float32", old, log_target=True), old)
    assert verdict is Verdict.CHANGED and "_loss_bwd_flat_kernel" in detail
    # a 16-bit out takes _kl_log_narrow on CUDA, which the edit does not touch
    verdict, detail = comparer.compare(_entry("kl_div-log", "bfloat16", old, log_target=True), old)
    assert verdict is Verdict.SAME, detail


def test_restamp_writes_the_same_entries_and_leaves_the_changed_stale(tmp_path: Path) -> None:
    tree = tree_sources("cuda")
    old = _edited(tree, "lc3 = tl.log2(", "lc3 = tl.log2(  # a comment moves nothing\n        ")
    old = _edited(old, "return ((g * (q * -1.0)) * q) * q", "return ((g * (q * -1.0)) * q) * (q + 0.0)")
    entries = [
        _entry("l1", "float16", old),
        _entry("kl_div-log", "float16", old, log_target=True),
        _entry("kl_div-log", "float32", old, log_target=True),
    ]
    path = tmp_path / "cuda" / "nvidia-h200.json"
    path.parent.mkdir()
    table = {"schema_version": frozen.SCHEMA_VERSION, "backend": "cuda", "device": "nvidia-h200", "entries": entries}
    path.write_text(json.dumps(table))
    outcomes = restamp_table(path, storage=str(tmp_path / "journal.log"), find_sources=lambda op, h, c: old, tree=tree)
    verdicts = [o.verdict for o in outcomes if o.where.startswith("entries")]
    assert verdicts == [Verdict.SAME, Verdict.CHANGED, Verdict.SAME]
    written = json.loads(path.read_text())["entries"]
    assert [e["kernel_hash"] == tree.kernel_hash(e["op"]) for e in written] == [True, False, True]
    assert written[0]["restamped"]["compiled_for"] == "sm_90" and written[0]["restamped"]["from"] == old.kernel_hash(
        "l1"
    )


def test_a_cuda_table_of_an_unknown_gpu_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cuda" / "nvidia-b200.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"schema_version": frozen.SCHEMA_VERSION, "entries": []}))
    with pytest.raises(ValueError, match="table: expected a CUDA table of a known GPU .*got nvidia-b200"):
        restamp_table(path, dry_run=True)
