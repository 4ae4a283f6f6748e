"""The CPU strided walk's builds (cpu_loops.StridedRun): one compiled walk per kind of innermost run
(a 0-d gradient over unit-stride operands, all unit-stride, any strides), picked per geometry by
cpu_loops.strided_run. The builds only regroup the loops each walk had, so each must give bitwise
what the general one (ANY, valid for every geometry) gives, and the contiguous copies' bits. The
same for the deferred transposed walk of a compute-bound formula (KL log_target), built per kind of
its pass (a)'s runs (cpu_loops.transposed_run); the other formulas keep one build of it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

import kernels
from kernels import dispatch
from kernels.backends import cpu, cpu_loops
from kernels.backends.cpu_loops import StridedRun
from kernels.modes import Layout
from kernels.ops import kl_div, mse
from kernels.plan import elementwise_geometry
from tests.helpers import as_bits

pytestmark = pytest.mark.usefixtures("cpu_backend")

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ROWS, COLS = 6, 333  # a run of 333: whole vectors and a remainder at every width
CALLS: dict[str, Callable[..., torch.Tensor]] = {
    "mse": lambda g, x, t, red, **kw: kernels.mse_loss_backward(g, x, t, red, **kw),
    "l1": lambda g, x, t, red, **kw: kernels.l1_loss_backward(g, x, t, red, **kw),
    "kl_div": lambda g, x, t, red, **kw: kernels.kl_div_backward(g, x, t, red, False, **kw),
    "kl_div-log": lambda g, x, t, red, **kw: kernels.kl_div_backward(g, x, t, red, True, **kw),
}


def _operands(kind: StridedRun, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, str]:
    """A broadcast problem of (ROWS, COLS) whose innermost runs are of ``kind``, and its reduction."""
    gen = torch.Generator().manual_seed(7)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.rand(shape, generator=gen) * 4 - 2).to(dtype)

    x, row = rand(ROWS, COLS), rand(1, COLS).expand(ROWS, COLS)  # target: one row, stride 0 outside
    if kind is StridedRun.SCALAR_G:
        return rand(), x, row, "mean"
    if kind is StridedRun.UNIT:
        return rand(ROWS, COLS), x, row, "none"
    return rand(ROWS, COLS), x, rand(ROWS, 1).expand(ROWS, COLS), "none"  # target stride 0 inside


def _run_of(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> StridedRun:
    out = torch.empty(ROWS, COLS)
    geo = elementwise_geometry(g, x, t, out, (ROWS, COLS))
    assert geo.layout is Layout.STRIDED
    return cpu_loops.strided_run(np.array(geo.strides, np.int64))


@pytest.mark.parametrize("kind", list(StridedRun), ids=str)
def test_each_geometry_takes_the_build_of_its_innermost_runs(kind: StridedRun) -> None:
    g, x, t, _ = _operands(kind, torch.float32)
    assert _run_of(g, x, t) is kind


def test_a_gradient_broadcast_along_the_runs_reads_once_per_run() -> None:
    """A (rows, 1) gradient is stride 0 along the runs, as a 0-d one is: its value is one per run."""
    g = torch.randn(ROWS, 1).expand(ROWS, COLS)
    assert _run_of(g, torch.randn(ROWS, COLS), torch.randn(1, COLS).expand(ROWS, COLS)) is StridedRun.SCALAR_G


def test_a_geometry_with_no_dims_takes_the_general_build() -> None:
    assert cpu_loops.strided_run(np.zeros((4, 0), np.int64)) is StridedRun.ANY


@pytest.mark.parametrize("kind", [StridedRun.SCALAR_G, StridedRun.UNIT], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", CALLS)
@pytest.mark.parametrize("cores", [1, 2])
def test_each_build_gives_the_general_builds_and_the_contiguous_bits(
    kind: StridedRun, dtype: torch.dtype, op: str, cores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    g, x, t, red = _operands(kind, dtype)
    if op.startswith("kl_div"):
        t = t.abs()
    config = {"variant": "strided", "tile": 256, "cores": cores}
    dispatch.clear_plans()
    picked = CALLS[op](g, x, t, red, backend="cpu", config=config)
    # The general build forced onto the same geometry: it indexes every operand by its stride.
    monkeypatch.setattr(cpu, "_run_kind", lambda geo, x_axis: StridedRun.ANY)
    dispatch.clear_plans()
    general = CALLS[op](g, x, t, red, backend="cpu", config=config)
    monkeypatch.undo()
    dense = CALLS[op](g.contiguous(), x, t.contiguous(), red, backend="cpu")
    assert torch.equal(as_bits(picked), as_bits(general))
    assert torch.equal(as_bits(picked), as_bits(dense))


def test_every_build_is_compiled_on_its_own() -> None:
    """One function per kind: the point of the split (their loops keep their constants in registers)."""
    builds = cpu.BACKEND.kernels(mse.FORMULA).strided
    assert set(builds) == set(StridedRun)
    assert len({id(fn) for pair in builds.values() for fn in pair}) == 2 * len(StridedRun)


def _transposed_run(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> StridedRun:
    rows, cols = x.shape
    geo = elementwise_geometry(g, x, t, torch.empty(cols, rows).t(), (rows, cols))
    assert geo.layout is Layout.TRANSPOSED
    return cpu_loops.transposed_run(np.array(geo.strides, np.int64))


def _transposed_operands(
    kind: StridedRun, dtype: torch.dtype, rows: int = 192, cols: int = 136
) -> tuple[torch.Tensor, ...]:
    """Inputs (rows, cols) row-major, out column-major (a transposed problem), pass (a)'s runs of ``kind``."""
    gen = torch.Generator().manual_seed(11)

    def rand(*shape: int) -> torch.Tensor:
        return (torch.rand(shape, generator=gen) * 4 - 2).to(dtype)

    x, t = rand(rows, cols), rand(rows, cols).abs()
    if kind is StridedRun.SCALAR_G:
        return rand(), x, t, "mean"
    if kind is StridedRun.UNIT:
        return rand(rows, cols), x, t, "none"
    wide = rand(rows, 2 * cols)[:, ::2]  # the inputs at stride 2 along the runs
    return rand(rows, cols), wide, wide.abs(), "none"


@pytest.mark.parametrize("kind", list(StridedRun), ids=str)
def test_each_transposed_geometry_takes_the_build_of_its_pass_a_runs(kind: StridedRun) -> None:
    """Out's stride (the outer dim's) does not count: pass (a) writes a buffer, not out."""
    g, x, t, _ = _transposed_operands(kind, torch.float32)
    assert _transposed_run(g, x, t) is kind


def test_a_row_of_gradients_over_transposed_inputs_takes_the_unit_build() -> None:
    """A (cols,) gradient is stride 0 across rows and 1 along the runs: a unit run, not a 0-d one."""
    x = torch.randn(64, 96)
    assert _transposed_run(torch.randn(96), x, x) is StridedRun.UNIT


def test_only_the_compute_bound_formulas_deferred_walk_is_built_per_kind() -> None:
    """KL log_target's walks are one function per kind (their exp loops keep their constants in
    registers); mse's is one function for every kind, its compiled loops as they were."""
    for formula, builds in ((kl_div.FORMULA_LOG, len(StridedRun)), (mse.FORMULA, 1)):
        walks = cpu.BACKEND.kernels(formula).transposed_deferred
        for tile in cpu_loops.TRANSPOSED_TILES:
            for row in cpu_loops.TRANSPOSE_ROWS:
                fns = {id(fn) for kind in StridedRun for fn in walks[tile, row, kind]}
                assert len(fns) == 2 * builds, (formula.name, tile, row)


# (192, 136): tiles of 128 rows by 64 columns, ragged at both edges; (424, 64): runs as long as a
# tile (the tile is one run), whole tiles in sequence, the last ragged (the whole-tile fast path).
@pytest.mark.parametrize("shape", [(192, 136), (424, 64)], ids=str)
@pytest.mark.parametrize("kind", list(StridedRun), ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("cores", [1, 2])
def test_each_deferred_build_gives_the_general_builds_and_the_contiguous_bits(
    shape: tuple[int, int], kind: StridedRun, dtype: torch.dtype, cores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KL log_target's deferred walk (offered here whatever the host: the walk runs on any x86;
    cpu_loops.DEFERRED only says where it pays) with the build for its runs, then with the general
    build forced onto the same geometry, then the contiguous call."""
    g, x, t, red = _transposed_operands(kind, dtype, *shape)
    _check_deferred_builds(g, x, t, red, cores, monkeypatch)


def _check_deferred_builds(
    g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, red: str, cores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KL log_target's deferred walk (cpu_loops.DEFERRED set here) on transposed-problem operands,
    with the build for their runs, then with the general build forced onto the same geometry:
    bitwise each other's and the contiguous call's. Undoes ``monkeypatch``."""
    rows, cols = x.shape
    monkeypatch.setattr(cpu_loops, "DEFERRED", True)
    row = cpu_loops.TRANSPOSE_ROWS[-1]
    config = {"variant": "strided", "tile": 4096, "cores": cores, "defer_out": True, "transpose_row": row}

    def call() -> torch.Tensor:
        dispatch.clear_plans()
        out = torch.empty(cols, rows, dtype=x.dtype).t()
        return CALLS["kl_div-log"](g, x, t, red, backend="cpu", config=config, out=out)

    picked = call()
    monkeypatch.setattr(cpu, "_run_kind", lambda geo, x_axis: StridedRun.ANY)
    general = call()
    monkeypatch.undo()
    dispatch.clear_plans()
    dense = CALLS["kl_div-log"](g.contiguous(), x.contiguous(), t.contiguous(), red, backend="cpu")
    assert torch.equal(as_bits(picked), as_bits(general))
    assert torch.equal(as_bits(picked), as_bits(dense))


@pytest.mark.parametrize("shape", [(192, 136), (424, 64)], ids=str)
@pytest.mark.parametrize("unit", [True, False], ids=["unit", "stride2"])
@pytest.mark.parametrize("red", ["mean", "sum"])
@pytest.mark.parametrize("cores", [1, 2])
def test_the_float32_deferred_walk_with_a_0d_gradient_gives_the_general_builds_and_the_contiguous_bits(
    shape: tuple[int, int], unit: bool, red: str, cores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KL log_target's deferred walk into a float32 out (CpuBackend.deferred_wide, offered here
    whatever the host), a 0-d gradient by mean and by sum over unit runs (SCALAR_G: whole tiles in
    sequence at (424, 64), the held rows between float32's 64-element pieces) and over inputs of
    stride 2 (the general build): bitwise the general build's and the contiguous call's."""
    rows, cols = shape
    gen = torch.Generator().manual_seed(13)
    # log-targets from -90 to 90: exps under float32's normal range, over it and everything between
    wide = torch.rand(rows, 2 * cols, generator=gen) * 180 - 90
    t = wide[:, :cols].contiguous() if unit else wide[:, ::2]
    x, g = torch.randn(rows, cols, generator=gen), torch.tensor(0.3)
    assert _transposed_run(g, x, t) is (StridedRun.SCALAR_G if unit else StridedRun.ANY)
    monkeypatch.setattr(cpu.BACKEND, "deferred_wide", True)
    _check_deferred_builds(g, x, t, red, cores, monkeypatch)
