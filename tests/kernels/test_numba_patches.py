"""numba's copy propagation without its deepcopies (kernels.backends.numba_patches): on the backend's
own loops it returns numba's sets call for call, two fresh processes compile the same LLVM IR with it
on and off, and it goes in only over the numba source it was written against."""

from __future__ import annotations

import collections
import json
from typing import Any

import pytest
import torch
from numba.core import ir_utils
from numba.parfors import parfor

import kernels
from kernels.backends import cpu, cpu_loops, jit_cache, numba_patches
from kernels.modes import Variant
from kernels.tiling import Tiling
from tests.helpers import run_fresh


def test_the_cpu_backend_installs_it_over_the_numba_it_was_written_against() -> None:
    state = numba_patches.state()
    assert state.installed, state.why
    assert ir_utils.copy_propagate is numba_patches.copy_propagate
    assert parfor.copy_propagate is numba_patches.copy_propagate
    assert numba_patches._theirs is not None and numba_patches._theirs is not numba_patches.copy_propagate


TWO_CORES = Tiling(tile=4096, cores=2, variant=Variant.STRIDED)  # the walks' parallel builds
needs_two = pytest.mark.skipif(cpu_loops.max_threads() < 2, reason="a parallel loop's launch needs two threads")


@needs_two
def test_it_returns_numbas_sets_call_for_call_while_a_parallel_walk_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every copy propagation a fresh build of the strided walk's parallel loop runs (mse's 0-d gradient
    against an input broadcast along 256 rows, float32 and bfloat16; the parfor bodies' own within it)
    is done by numba's function and by ours on the same blocks, and the in and out sets are equal each
    time. (A serial loop runs no parfor pass: the config's two cores are what launch the parallel one.)"""
    theirs = numba_patches._theirs
    assert theirs is not None
    copies: list[int] = []

    def both(blocks: dict[int, Any], typemap: dict[str, Any]) -> tuple[dict[int, Any], dict[int, Any]]:
        want = theirs(blocks, typemap)
        got = numba_patches.copy_propagate(blocks, typemap)
        assert got == want
        copies.append(sum(map(len, got[0].values())))
        return got

    monkeypatch.setattr(ir_utils, "copy_propagate", both)
    monkeypatch.setattr(parfor, "copy_propagate", both)
    monkeypatch.setenv(jit_cache.ENABLE_ENV, "0")  # compiled here, not loaded
    monkeypatch.setattr(cpu.BACKEND, "_kernels", {})  # the loops built again: new dispatchers
    for dtype in (torch.float32, torch.bfloat16):
        t, x = torch.randn(256, 256).to(dtype), torch.randn(1, 256).to(dtype)
        kernels.mse_loss_backward(torch.tensor(0.5).to(dtype), x, t, "sum", backend="cpu", config=TWO_CORES)
    compiled = [name for name, fn in cpu.BACKEND.built() if fn.signatures]
    assert any("parallel" in name for name in compiled), compiled
    # the walks' blocks carry copies into one another: the fixed point had work to do
    assert len(copies) >= 20 and max(copies) > 0, copies


def _kills(a, b, c):  # noqa: ANN001, ANN202 - numba IR material, never run
    x = a
    w = b
    if c:
        a = b + 1.0  # x = a's rhs assigned (not a copy): killed in this branch
    else:
        x = b * 2.0  # x = a's lhs assigned (not a copy): killed in this one
    y = x
    while c > 0.0:
        z = y
        y = b  # y = x's lhs assigned by a copy
        b = z  # w = b's rhs assigned by a copy
        c -= 1.0
    return x + y + a + b + w


def _inplace(a, b):  # noqa: ANN001, ANN202
    x = a
    a += b  # inplace on a mutable operand kills what copies it
    y = x
    for _ in range(3):
        y = a if y else x
    return y


@pytest.mark.parametrize("fn", [_kills, _inplace], ids=lambda fn: fn.__name__)
def test_it_returns_numbas_sets_on_branches_loops_and_kills(fn: Any) -> None:
    """numba's IR of small functions (before SSA: names reassigned across blocks) with every name one
    type, so each ``a = b`` is a copy: copies killed by a reassigned lhs or rhs in another block, by an
    in-place operation on an array (``_inplace``'s a is typed as one), through branches and loops."""
    from numba.core import types
    from numba.core.compiler import run_frontend

    blocks = run_frontend(fn).blocks
    typemap = collections.defaultdict(lambda: types.float64[:] if fn is _inplace else types.float64)
    theirs = numba_patches._theirs
    assert theirs is not None
    got, want = numba_patches.copy_propagate(blocks, typemap), theirs(blocks, typemap)
    assert got == want
    assert len(blocks) >= 4 and any(want[1].values()), want


# Two walks' parallel loops (mse's strided walk, l1's transposed walk, a config of two cores) in two
# dtypes, through the public calls: the sha256 of each compiled signature's LLVM IR.
_COMPILE = """
import hashlib, json, re
import torch
import kernels
from kernels.backends import cpu, numba_patches
from kernels.modes import Variant
from kernels.tiling import Tiling
two = Tiling(tile=4096, cores=2, variant=Variant.STRIDED)
for dt in (torch.float32, torch.bfloat16):
    t, x = torch.randn(256, 256).to(dt), torch.randn(1, 256).to(dt)
    kernels.mse_loss_backward(torch.tensor(0.5).to(dt), x, t, "sum", backend="cpu", config=two)
    g, x, t = (torch.randn(256, 256).to(dt) for _ in range(3))
    kernels.l1_loss_backward(g, x.t(), t, "none", backend="cpu", config=two)
print(json.dumps({
    "installed": numba_patches._state.installed,  # set by the backend's import, not asked for here
    "parallel": sum(bool(f.signatures) for n, f in cpu.BACKEND.built() if "parallel" in n),
    "ir": {f"{n} {s}": hashlib.sha256(re.sub(r"_gufunc_0x[0-9a-f]+", "", f.inspect_llvm(s)).encode()).hexdigest()
           for n, f in cpu.BACKEND.built() for s in f.signatures},
}))
"""


@needs_two
def test_two_fresh_processes_compile_the_same_llvm_ir_with_it_and_without() -> None:
    """The IR's text, names included but for the address numba writes into a parallel loop's outlined
    function's name (an object's id, no two processes alike): with the compiled-loop cache off
    (numba's counters start at 1) and one hash seed, a process with numba's own copy propagation and
    one with ours compile the same text.
    Each process's backend import is what installed it (or, switched off, did not)."""
    env = {"PYTHONHASHSEED": "0", jit_cache.ENABLE_ENV: "0"}
    on, off = (json.loads(run_fresh(_COMPILE, env | {numba_patches.ENABLE_ENV: v})) for v in ("1", "0"))
    assert on["installed"] and not off["installed"]
    assert on["parallel"] >= 2 and len(on["ir"]) >= 4 and on["ir"] == off["ir"]


@pytest.mark.parametrize(
    ("switch", "digest", "parfor_own", "why"),
    [
        ("0", None, False, "numba's own copy propagation (LOSSTUNE_NUMBA_PATCHES=0)"),
        ("1", "0" * 16, False, "its source (7e885590b506fb65) is not the one the patch was written against (0000"),
        ("1", None, True, "numba.parfors.parfor holds another copy_propagate"),
    ],
    ids=["switched-off", "other-source", "parfor-patched-elsewhere"],
)
def test_numbas_own_function_stays_where_the_patch_cannot_be_known_to_match(
    monkeypatch: pytest.MonkeyPatch, switch: str, digest: str | None, parfor_own: bool, why: str
) -> None:
    """Reinstalled over numba's own function (as a fresh process finds it): switched off, over source
    other than the one it copies, or where something else has replaced parfor's; numba's stays."""
    theirs = numba_patches._theirs
    monkeypatch.setattr(numba_patches, "_state", None)
    monkeypatch.setattr(ir_utils, "copy_propagate", theirs)
    other = lambda blocks, typemap: theirs(blocks, typemap)  # noqa: E731 - someone else's patch
    monkeypatch.setattr(parfor, "copy_propagate", other if parfor_own else theirs)
    monkeypatch.setenv(numba_patches.ENABLE_ENV, switch)
    if digest is not None:
        monkeypatch.setattr(numba_patches, "_NUMBA_SOURCE_SHA256", digest)
    state = numba_patches.install()
    assert not state.installed and why in state.why
    assert ir_utils.copy_propagate is theirs
    assert parfor.copy_propagate is (other if parfor_own else theirs)
    assert numba_patches.install() is state  # once a process


def test_a_bad_switch_leaves_numba_alone_with_a_warning_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = numba_patches._theirs
    monkeypatch.setattr(numba_patches, "_state", None)
    monkeypatch.setattr(ir_utils, "copy_propagate", theirs)
    monkeypatch.setattr(parfor, "copy_propagate", theirs)
    monkeypatch.setenv(numba_patches.ENABLE_ENV, "yes")
    with pytest.warns(RuntimeWarning, match="LOSSTUNE_NUMBA_PATCHES: expected 0 or 1, got 'yes'"):
        state = numba_patches.install()
    assert not state.installed and ir_utils.copy_propagate is theirs
