"""The CPU backend's fused transposed walk (cpu_loops.FUSED_WALKS, Tiling.fused): KL without
logTarget with a 0-d gradient, a transposed target and a contiguous out, its formula (-t * g) * cof
applied to the columns of the register transposes straight from the target. Every call must give
bitwise what the same call on a contiguous target gives (float16 and float32, every register row
the host offers, 1 and 2 cores, streamed or not, special values in the target), and a problem the
walk does not fit must run the config's own walk with the same bits. The knob is offered where
cpu_loops.FUSED says (the Zen 5, or LOSSTUNE_CPU_FUSED=1), for those formulas and dtypes alone."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest
import torch

import kernels
from kernels import dispatch, plan, tiling
from kernels.backends import cpu, cpu_loops
from kernels.modes import Variant
from kernels.ops import kl_div, mse
from kernels.tiling import Tiling
from tests.helpers import as_bits, refused_in_fresh_process

pytestmark = pytest.mark.usefixtures("cpu_backend")

# (rows, cols) of out, the target a transposed view: whole block pairs in both dims (the fused walk
# runs), 64 rows of many pieces of FUSED_ROWS, then rows or columns that leave a block part (the
# config's own walk runs).
FITS = ((64, 2 * cpu_loops.FUSED_ROWS + 512), (128, 1024), (96, 640))
MISFITS = ((64, 1000), (36, 512), (70, 320))
SPECIAL = (float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 6.0e4, 1.0e-7, -3.5e-6, 2.0**-20)


@pytest.fixture
def fused_offered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fused walk offered, whatever this host's CPU (its intrinsics compile on any x86 host with
    F16C: without it LLVM's float16 conversions call a helper numba does not link); the plan cache
    cleared on both sides, since a plan holds its space."""
    if not cpu_loops.HAS_F16C:
        pytest.skip("the fused walk needs F16C")
    monkeypatch.setattr(cpu_loops, "FUSED", True)
    dispatch.clear_plans()
    yield
    dispatch.clear_plans()


def _target(shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    t = torch.randn(shape[::-1], generator=torch.Generator().manual_seed(7)).t()
    t[: len(SPECIAL) // 3, :3] = torch.tensor(SPECIAL).view(-1, 3)[: len(SPECIAL) // 3]
    return t.to(dtype)


def _configs() -> Iterator[Tiling]:
    for row in cpu_loops.TRANSPOSE_ROWS:
        for cores, stream in ((1, False), (1, True), (2, True), (2, False)):
            yield Tiling(tile=4096, cores=cores, variant=Variant.STRIDED, stream=stream, transpose_row=row, fused=True)


@pytest.mark.usefixtures("fused_offered")
@pytest.mark.parametrize("shape", FITS + MISFITS, ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize(
    ("reduction", "grad"),
    [("mean", 0.75), ("sum", -3.0), ("sum", float("inf")), ("mean", 0.0), ("sum", -0.0), ("mean", float("nan"))],
)
def test_the_fused_walk_gives_the_contiguous_bits(
    monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int], dtype: torch.dtype, reduction: str, grad: float
) -> None:
    """Each fused walk wrapped to count its calls, so a fitting shape is known to have run it and
    a misfitting one, or a NaN gradient, the config's own walk."""
    calls = []

    def counted(walk: Callable[..., None]) -> Callable[..., None]:
        def run(*args: object) -> None:
            calls.append(walk)
            walk(*args)

        return run

    walks = {row: tuple(counted(w) for w in builds) for row, builds in cpu_loops.FUSED_WALKS.items()}
    monkeypatch.setattr(cpu_loops, "FUSED_WALKS", walks)
    t = _target(shape, dtype)
    g = torch.tensor(grad).to(dtype)
    want = kernels.kl_div_backward(g, t.contiguous(), t.contiguous(), reduction, False)
    for config in _configs():
        got = kernels.kl_div_backward(g, t, t, reduction, False, config=config)
        assert torch.equal(as_bits(got), as_bits(want)), (config.short(), shape)
    assert len(calls) == (len(list(_configs())) if shape in FITS and not math.isnan(grad) else 0)


def test_the_fused_walk_fits_whole_block_pairs_of_a_unit_stride_target() -> None:
    """fused_fits: the walk's rows in stacked block pairs, its columns in blocks (16 float32 or 32
    16-bit elements a whole-line row, half that a half row), the target unit-stride along them."""
    line, half = cpu_loops.LINE, cpu_loops.LINE // 2
    assert cpu_loops.fused_fits((64, 32), (32, 1), half, 2)  # 16 x 16 blocks: pairs of 32 rows
    assert not cpu_loops.fused_fits((48, 32), (32, 1), half, 2)
    assert not cpu_loops.fused_fits((64, 24), (24, 1), half, 2)
    assert cpu_loops.fused_fits((64, 32), (32, 1), line, 4)  # float32 16 x 16
    assert cpu_loops.fused_fits((64, 32), (32, 1), line, 2)  # 16-bit 32 x 32: pairs of 64 rows
    assert not cpu_loops.fused_fits((96, 32), (32, 1), line, 2)
    assert not cpu_loops.fused_fits((64, 32), (1, 64), half, 2)  # the target's columns strided
    assert not cpu_loops.fused_fits((64, 32, 2), (64, 2, 1), half, 2)


def test_plumbing_with_a_spy_walk_a_fused_config_takes_the_fused_walk_where_it_fits(
    monkeypatch: pytest.MonkeyPatch, fused_offered: None
) -> None:
    """A spy stands in for every fused walk (this tests the launch's pick, not the walk): a fused
    config runs it where the problem fits and the target's dtype is out's, with the target's and
    out's strides, the gradient's value, the cores and the stream flag; elsewhere the config's own
    walk runs and the spy is not called."""
    calls: list[tuple[object, ...]] = []

    def spy(*args: object) -> None:
        calls.append(args)

    spies = {row: (spy, spy) for row in cpu_loops.TRANSPOSE_ROWS}
    monkeypatch.setattr(cpu_loops, "FUSED_WALKS", spies)
    row = cpu_loops.TRANSPOSE_ROWS[-1]
    config = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, stream=True, transpose_row=row, fused=True)
    t = _target((128, 1024), torch.float16)
    kernels.kl_div_backward(torch.tensor(0.5).half(), t, t, "sum", False, config=config)
    assert len(calls) == 1
    *_, rows, cols, st0, so1, g0, cof, cores, stream = calls[0]
    assert (rows, cols, st0, so1, g0, cof, cores, stream) == (1024, 128, 128, 1024, 0.5, 1.0, 2, True)
    t = _target((64, 1000), torch.float16)
    want = kernels.kl_div_backward(torch.tensor(0.5).half(), t.contiguous(), t.contiguous(), "sum", False)
    got = kernels.kl_div_backward(torch.tensor(0.5).half(), t, t, "sum", False, config=config)
    assert len(calls) == 1 and torch.equal(as_bits(got), as_bits(want))


def test_the_fused_walk_is_offered_for_a_negated_scale_with_a_0d_gradient_in_float16_and_float32(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tiling.fused is in the space of KL without logTarget with a 0-d gradient and a float16 or
    float32 out, where cpu_loops.FUSED; not for bfloat16, a full gradient, logTarget or mse; a
    space without it keeps the hash it had; with the other walk knobs a constraint keeps it alone."""
    backend = cpu.CpuBackend()
    x = torch.randn(256, 64).t()
    scalar = plan.elementwise_geometry(torch.tensor(1.0), x, x, torch.empty(64, 256), (64, 256))
    full = plan.elementwise_geometry(x, x, x, torch.empty(64, 256), (64, 256))
    monkeypatch.setattr(cpu_loops, "FUSED", True)
    assert kl_div.FORMULA.negated_scale and not kl_div.FORMULA_LOG.negated_scale and not mse.FORMULA.negated_scale
    for formula, geo, dtype, offered in (
        (kl_div.FORMULA, scalar, torch.float16, True),
        (kl_div.FORMULA, scalar, torch.float32, True),
        (kl_div.FORMULA, scalar, torch.bfloat16, False),
        (kl_div.FORMULA, full, torch.float16, False),
        (kl_div.FORMULA_LOG, scalar, torch.float16, False),
        (mse.FORMULA, scalar, torch.float32, False),
    ):
        space = backend.space(formula, geo, dtype)
        assert ("fused" in dict(space.knobs)) == offered, (formula.name, dtype)
        monkeypatch.setattr(cpu_loops, "FUSED", False)
        without = backend.space(formula, geo, dtype)
        monkeypatch.setattr(cpu_loops, "FUSED", True)
        assert (space.hash == without.hash) != offered and space.default == without.default
    space = backend.space(kl_div.FORMULA, scalar, torch.float16)
    fused = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, stream=True, fused=True)
    assert fused in space and fused.short() == "strided tile=4096 cores=2 stream fused"
    assert Tiling.from_dict(fused.to_dict()) == fused
    if "transpose_in" in dict(space.knobs):
        both = Tiling(tile=4096, cores=1, variant=Variant.STRIDED, transpose_in=True, fused=True)
        assert space.violations(both) == ["fused_alone: not (fused and (transpose_in or defer_out))"]
    alone = tiling.cpu_transposed_space(backend.facts(), 1 << 14, 1 << 15, fused=True)
    assert not alone.constraints and any(c.fused for c in alone) and any(not c.fused for c in alone)


def test_the_fused_walk_is_offered_where_asked_and_a_bad_switch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """_fused: the Zen 5 alone unless LOSSTUNE_CPU_FUSED says, and never without F16C."""
    monkeypatch.setattr(cpu_loops, "HAS_F16C", True)
    for value, cpu_name, want in (
        (None, "znver5", True),
        (None, "znver4", False),
        (None, "sapphirerapids", False),
        ("1", "znver3", True),
        ("0", "znver5", False),
    ):
        monkeypatch.setattr(cpu_loops, "target_cpu", lambda name=cpu_name: name)
        if value is None:
            monkeypatch.delenv("LOSSTUNE_CPU_FUSED", raising=False)
        else:
            monkeypatch.setenv("LOSSTUNE_CPU_FUSED", value)
        assert cpu_loops._fused() is want, (value, cpu_name)
    monkeypatch.setattr(cpu_loops, "HAS_F16C", False)
    assert cpu_loops._fused() is False
    monkeypatch.setattr(cpu_loops, "HAS_F16C", True)
    monkeypatch.setenv("LOSSTUNE_CPU_FUSED", "yes")
    with pytest.raises(ValueError, match="LOSSTUNE_CPU_FUSED: expected 0 or 1, got 'yes'"):
        cpu_loops._fused()


def test_a_fused_config_is_refused_where_the_host_offers_none() -> None:
    """Without the knob a fused config is not in the space: the call says so, naming it, before
    anything is written into out."""
    refused_in_fresh_process(
        "fused=True", "kl_div_backward(torch.tensor(1.0), t, t, 'mean', False", {"LOSSTUNE_CPU_FUSED": "0"}
    )
