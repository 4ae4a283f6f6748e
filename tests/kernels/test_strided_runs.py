"""The CPU strided walk's builds (cpu_loops.StridedRun): one compiled walk per kind of innermost run
(a 0-d gradient over unit-stride operands, all unit-stride, any strides), picked per geometry by
cpu_loops.strided_run. The builds only regroup the loops each walk had, so each must give bitwise
what the general one (ANY, valid for every geometry) gives, and the contiguous copies' bits."""

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
from kernels.ops import mse
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
    monkeypatch.setattr(cpu, "_strided_run", lambda geo, x_axis: StridedRun.ANY)
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
