"""The CPU backend's fused transposed walk (cpu_loops.FUSED_WALKS, Tiling.fused): a formula with a
form (Formula.fused_form: KL without logTarget's negated scale (-t * g) * cof, mse's scaled
difference ((x - t) * cof) * g), transposed inputs and a contiguous out, the form applied inside
the register transposes. Every call must give bitwise what the same call on contiguous inputs gives
(float16, bfloat16 and float32; 0-d and full gradients; every register row the host offers, 1 and
2 cores, streamed or not; special values in every input), and a problem the walk does not fit must
run the config's own walk with the same bits. The knob is offered where cpu_loops.FUSED says (the
Zen 5, or LOSSTUNE_CPU_FUSED=1), for formulas with a form alone; its paired half rows
(Tiling.paired, cpu_loops.PAIRED_WALKS) where cpu_loops.PAIRED says, and are held to the same bits."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest
import torch

import kernels
from kernels import dispatch, plan, tiling
from kernels.backends import cpu, cpu_loops
from kernels.executor import Formula
from kernels.modes import FusedForm, Variant
from kernels.ops import kl_div, l1, mse
from kernels.tiling import Tiling
from tests.helpers import as_bits, assert_cpu_pick, refused_in_fresh_process

pytestmark = pytest.mark.usefixtures("cpu_backend")

# (rows, cols) of out, the inputs transposed views: whole block pairs in both dims (the fused walk
# runs), 64 rows of many pieces of FUSED_ROWS, then rows or columns that leave a block part (the
# config's own walk runs).
FITS = ((64, 2 * cpu_loops.FUSED_ROWS + 512), (128, 1024), (96, 640))
MISFITS = ((64, 1000), (70, 320))
# float32 subnormals among them: bfloat16 keeps them, and its rounding treats them apart
SPECIAL = (float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 6.0e4, 1.0e-7, -3.5e-6, 2.0**-20, 1e-39, -3e-40, 5.0)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# a negative quiet NaN with a payload of its own in each dtype (torch's NaN is positive, payload 0)
_NEGATIVE_NAN = {
    torch.float16: torch.tensor([-0x1E0], dtype=torch.int16).view(torch.float16)[0],
    torch.bfloat16: torch.tensor([-0x3E], dtype=torch.int16).view(torch.bfloat16)[0],
    torch.float32: torch.tensor([-0x3FFF00], dtype=torch.int32).view(torch.float32)[0],
}


@pytest.fixture
def fused_offered(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fused walk offered, whatever this host's CPU (its intrinsics compile on any x86 host with
    F16C: without it LLVM's float16 conversions call a helper numba does not link); the plan cache
    cleared on both sides, since a plan holds its space."""
    if not cpu_loops.HAS_F16C:
        pytest.skip("the fused walk needs F16C")
    if not cpu._holds_a_row(cpu_loops):
        pytest.skip("the fused walk needs a register that holds a transpose row")
    monkeypatch.setattr(cpu_loops, "FUSED", True)
    # Paired half rows too where the host has half rows and a register holds a whole line (the
    # AVX-512 hosts offered the walk knobs); elsewhere _configs has none.
    paired = cpu_loops.LINE // 2 in cpu_loops.TRANSPOSE_ROWS and cpu_loops.target_features().get("avx512f", False)
    monkeypatch.setattr(cpu_loops, "PAIRED", paired)
    if paired and not cpu_loops.PAIRED_WALKS:
        monkeypatch.setattr(cpu_loops, "PAIRED_WALKS", _paired_walks())
    dispatch.clear_plans()
    yield
    dispatch.clear_plans()


@functools.cache
def _paired_walks() -> dict[tuple[object, ...], tuple[Callable[..., None], Callable[..., None]]]:
    """cpu_loops._paired_walks built once per worker where the host did not build them, so each
    walk compiles once, not once a test."""
    return cpu_loops._paired_walks()


def _transposed(shape: tuple[int, int], dtype: torch.dtype, seed: int, special: tuple[float, ...]) -> torch.Tensor:
    """A transposed view of ``shape``, random, its first rows holding ``special`` values."""
    a = torch.randn(shape[::-1], generator=torch.Generator().manual_seed(seed)).t()
    k = len(special) // 3
    a[:k, :3] = torch.tensor(special).view(-1, 3)[:k]
    return a.to(dtype)


def _configs(dtype: torch.dtype = torch.float32, by_rows: bool = False) -> Iterator[Tiling]:
    """The fused configs a test runs: every register row, 1 and 2 cores, streamed or not; paired
    half rows too where offered, for a 16-bit ``dtype`` and a walk that converts rows
    (``by_rows``, cpu_loops.fused_by_rows): the space offers them there alone."""
    half = cpu_loops.LINE // 2
    with_paired = cpu_loops.PAIRED and dtype.itemsize == 2 and by_rows
    rows = [(row, False) for row in cpu_loops.TRANSPOSE_ROWS] + ([(half, True)] if with_paired else [])
    for row, paired in rows:
        for cores, stream in ((1, False), (1, True), (2, True), (2, False)):
            yield Tiling(
                tile=4096,
                cores=cores,
                variant=Variant.STRIDED,
                stream=stream,
                transpose_row=row,
                fused=True,
                paired=paired,
            )


def _call(op: str, g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, reduction: str, **kw: object) -> torch.Tensor:
    if op == "mse":
        return kernels.mse_loss_backward(g, x, t, reduction, **kw)
    return kernels.kl_div_backward(g, x, t, reduction, False, **kw)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """Every fused walk, paired or not, wrapped to record its key (with True where paired) on each
    call, so a test knows which ran."""
    calls: list[tuple[object, ...]] = []

    def counted(key: tuple[object, ...], walk: Callable[..., None]) -> Callable[..., None]:
        def run(*args: object) -> None:
            calls.append(key)
            walk(*args)

        return run

    for name, paired in (("FUSED_WALKS", False), ("PAIRED_WALKS", True)):
        walks = getattr(cpu_loops, name)
        wrapped = {key: tuple(counted((*key, paired), w) for w in builds) for key, builds in walks.items()}
        monkeypatch.setattr(cpu_loops, name, wrapped)
    return calls


@pytest.mark.usefixtures("fused_offered")
@pytest.mark.parametrize("shape", FITS + MISFITS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["kl_div", "mse"])
@pytest.mark.parametrize(
    ("reduction", "grad"),
    [("mean", 0.75), ("sum", float("inf")), ("sum", -0.0), ("mean", float("nan"))] + [("none", None)],
)
def test_the_fused_walk_gives_the_contiguous_bits(
    monkeypatch: pytest.MonkeyPatch, shape: tuple[int, int], dtype: torch.dtype, op: str, reduction: str, grad: float
) -> None:
    """Each fused walk wrapped to count its calls, so a fitting shape is known to have run it and
    a misfitting one, or a NaN 0-d gradient, the config's own walk. A full gradient (reduction
    none) holds the special values too, NaN where the target's is NaN among them."""
    calls = _counted(monkeypatch)
    x = _transposed(shape, dtype, 8, SPECIAL[::-1])
    t = _transposed(shape, dtype, 7, SPECIAL)
    g = torch.tensor(grad).to(dtype) if grad is not None else _transposed(shape, dtype, 9, SPECIAL)
    if grad is None:  # a NaN of its own where the target's is NaN: which one the walk keeps shows
        g[0, 0] = _NEGATIVE_NAN[dtype]
    gc = g if grad is not None else g.contiguous()
    want = _call(op, gc, x.contiguous(), t.contiguous(), reduction)
    # Where the gradient and an input are both NaN, the product's NaN is whichever operand the
    # multiply takes first, an order LLVM picks per loop: the walks' and the contiguous loop's
    # differ there on mse bfloat16 (its NaN target's 0xffff against the gradient's 0x7fc0), the
    # fused walk aside (a NaN 0-d gradient never takes it). Those elements need only be NaN.
    either = (x.isnan() | t.isnan()) & bool(grad is not None and math.isnan(grad))
    form = kl_div.FORMULA.fused_form if op == "kl_div" else mse.FORMULA.fused_form
    configs = list(_configs(dtype, cpu_loops.fused_by_rows(form, grad is None)))
    for config in configs:
        got = _call(op, g, x, t, reduction, config=config)
        assert torch.equal(as_bits(got)[~either], as_bits(want)[~either]), (config.short(), shape)
        assert got[either].isnan().all()
    runs = shape in FITS and (grad is None or not math.isnan(grad))
    assert len(calls) == (len(configs) if runs else 0)
    rows = [(c.transpose_row, c.paired) for c in configs]
    assert calls == ([(form, grad is not None, row, paired) for row, paired in rows] if runs else [])


@pytest.mark.usefixtures("fused_offered")
def test_an_operand_of_another_dtype_or_layout_runs_the_configs_own_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused walk reads every operand in out's element type and steps them alike: a float32
    gradient of a float16 KL, or an mse input laid out apart from its target, takes the config's
    own walk, with the same bits as the contiguous call."""
    calls = _counted(monkeypatch)
    config = next(_configs())
    t = _transposed((128, 1024), torch.float16, 7, SPECIAL)
    for g, runs in ((_transposed((128, 1024), torch.float16, 9, SPECIAL), 1), (t.float(), 0)):
        want = kernels.kl_div_backward(g.contiguous(), t.contiguous(), t.contiguous(), "none", False)
        got = kernels.kl_div_backward(g, t, t, "none", False, config=config)
        assert torch.equal(as_bits(got), as_bits(want)) and len(calls) == runs  # the first: the control
        calls.clear()
    g = torch.tensor(0.5).half()
    x_twice_apart = torch.randn(2048, 128).to(torch.float16)[::2].t()  # its rows twice the target's step apart
    for x, runs in ((_transposed((128, 1024), torch.float16, 8, SPECIAL), 1), (x_twice_apart, 0)):
        want = kernels.mse_loss_backward(g, x.contiguous(), t.contiguous(), "mean")
        got = kernels.mse_loss_backward(g, x, t, "mean", config=config)
        assert torch.equal(as_bits(got), as_bits(want)) and len(calls) == runs
        calls.clear()


def test_the_fused_walk_fits_whole_block_pairs_of_operands_that_step_alike() -> None:
    """fused_fits: the walk's rows in stacked block pairs, its columns in blocks (16 float32 or 32
    16-bit elements a whole-line row, half that a half row), every operand read unit-stride along
    them and stepping as the target does."""
    line, half = cpu_loops.LINE, cpu_loops.LINE // 2
    assert cpu_loops.fused_fits((64, 32), ((32, 1),), half, 2)  # 16 x 16 blocks: pairs of 32 rows
    assert not cpu_loops.fused_fits((48, 32), ((32, 1),), half, 2)
    assert not cpu_loops.fused_fits((64, 24), ((24, 1),), half, 2)
    assert cpu_loops.fused_fits((64, 32), ((32, 1),), line, 4)  # float32 16 x 16
    assert cpu_loops.fused_fits((64, 32), ((32, 1),), line, 2)  # 16-bit 32 x 32: pairs of 64 rows
    assert not cpu_loops.fused_fits((96, 32), ((32, 1),), line, 2)
    assert not cpu_loops.fused_fits((64, 32), ((1, 64),), half, 2)  # the target's columns strided
    assert not cpu_loops.fused_fits((64, 32, 2), ((64, 2, 1),), half, 2)
    assert cpu_loops.fused_fits((64, 32), ((32, 1), (32, 1), (32, 1)), half, 2)
    assert not cpu_loops.fused_fits((64, 32), ((32, 1), (64, 1)), half, 2)  # another row step
    assert not cpu_loops.fused_fits((64, 32), ((32, 1), (0, 0)), half, 2)  # a broadcast operand


def test_plumbing_with_a_spy_walk_a_fused_config_takes_the_fused_walk_where_it_fits(
    monkeypatch: pytest.MonkeyPatch, fused_offered: None
) -> None:
    """A spy stands in for every fused walk (this tests the launch's pick, not the walk): a fused
    config runs the walk of its formula's form and gradient kind where the problem fits, with the
    operands' addresses and spans, the target's and out's strides, the gradient's value, the cores
    and the stream flag; elsewhere the config's own walk runs and the spy is not called."""
    calls: list[tuple[object, ...]] = []

    def spy(key: tuple[object, ...]) -> Callable[..., None]:
        return lambda *args: calls.append((key, args))

    for name in ("FUSED_WALKS", "PAIRED_WALKS"):
        monkeypatch.setattr(
            cpu_loops, name, {key: (spy((name, *key)), spy((name, *key))) for key in getattr(cpu_loops, name)}
        )
    row = cpu_loops.TRANSPOSE_ROWS[-1]
    config = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, stream=True, transpose_row=row, fused=True)
    t = _transposed((128, 1024), torch.float16, 7, SPECIAL)
    kernels.kl_div_backward(torch.tensor(0.5).half(), t, t, "sum", False, config=config)
    x = _transposed((128, 1024), torch.float16, 8, SPECIAL)
    g = _transposed((128, 1024), torch.float16, 9, SPECIAL)
    kernels.mse_loss_backward(g, x, t, "none", config=config)
    assert [key for key, _ in calls] == [
        ("FUSED_WALKS", FusedForm.NEGATED_SCALE, True, row),
        ("FUSED_WALKS", FusedForm.SCALED_DIFFERENCE, False, row),
    ]
    (_, kl_args), (_, mse_args) = calls
    assert kl_args[1:3] == (t.data_ptr(), t.data_ptr())  # the target stands in for the unread self
    assert kl_args[8:12] == (1, t.numel(), t.numel(), t.numel())
    assert kl_args[12:] == (1024, 128, 128, 1024, 0.5, 1.0, 2, True)
    assert mse_args[:3] == (g.data_ptr(), x.data_ptr(), t.data_ptr()) and mse_args[8:12] == (t.numel(),) * 4
    assert mse_args[12:] == (1024, 128, 128, 1024, 0.0, 2.0, 2, True)
    t = _transposed((64, 1000), torch.float16, 7, SPECIAL)
    want = kernels.kl_div_backward(torch.tensor(0.5).half(), t.contiguous(), t.contiguous(), "sum", False)
    got = kernels.kl_div_backward(torch.tensor(0.5).half(), t, t, "sum", False, config=config)
    assert len(calls) == 2 and torch.equal(as_bits(got), as_bits(want))
    if cpu_loops.PAIRED:  # a paired config takes the paired walk of its form, with the same arguments
        paired = dataclasses.replace(config, transpose_row=cpu_loops.LINE // 2, paired=True)
        t = _transposed((128, 1024), torch.float16, 7, SPECIAL)
        kernels.mse_loss_backward(torch.tensor(0.5).half(), x, t, "sum", config=paired)
        assert calls[-1][0] == ("PAIRED_WALKS", FusedForm.SCALED_DIFFERENCE, True, cpu_loops.LINE // 2)
        assert calls[-1][1][12:] == (1024, 128, 128, 1024, 0.5, 2.0, 2, True)


def test_a_formula_of_an_older_op_module_says_its_negated_scale_by_the_old_flag() -> None:
    """tuner.restamp loads old revisions of the op modules, whose KL formula said
    ``negated_scale=True``: that still gives it the form, and nothing else does."""
    old = Formula("kl_div", kl_div.FORMULA.value, reads_input=False, triton_op=2, live_buffers=3, negated_scale=True)
    assert old.fused_form is FusedForm.NEGATED_SCALE
    assert Formula("x", kl_div.FORMULA.value, reads_input=False, triton_op=2, live_buffers=3).fused_form is None


def _spaces_setting() -> tuple[cpu.CpuBackend, object, object]:
    """A backend and the geometries of a transposed 64 x 256 problem with a 0-d and a full
    gradient, for the space tests; skipped where no register holds a transpose row."""
    if not cpu._holds_a_row(cpu_loops):
        pytest.skip("the fused walk needs a register that holds a transpose row")
    x = torch.randn(256, 64).t()
    scalar = plan.elementwise_geometry(torch.tensor(1.0), x, x, torch.empty(64, 256), (64, 256))
    full = plan.elementwise_geometry(x, x, x, torch.empty(64, 256), (64, 256))
    backend = cpu.CpuBackend()
    backend.fused_0d = False  # the Zen 4's pick for KL's 0-d walk, tested apart
    return backend, scalar, full


def test_the_fused_walk_is_offered_for_formulas_with_a_form(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiling.fused is in the transposed space of KL without logTarget and of mse, 0-d or full
    gradient, every dtype, where cpu_loops.FUSED; not for logTarget or l1; a space without it keeps
    the hash it had; with the other walk knobs a constraint keeps it alone."""
    backend, scalar, full = _spaces_setting()
    monkeypatch.setattr(cpu_loops, "FUSED", True)
    assert (
        kl_div.FORMULA.fused_form is FusedForm.NEGATED_SCALE and mse.FORMULA.fused_form is FusedForm.SCALED_DIFFERENCE
    )
    assert kl_div.FORMULA_LOG.fused_form is None and l1.FORMULA.fused_form is None
    cases = [(f, geo, dtype, True) for f in (kl_div.FORMULA, mse.FORMULA) for geo in (scalar, full) for dtype in DTYPES]
    cases += [(kl_div.FORMULA_LOG, scalar, torch.float16, False), (l1.FORMULA, full, torch.float32, False)]
    for formula, geo, dtype, offered in cases:
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


def test_paired_half_rows_are_offered_with_the_fused_walk_where_the_loops_say(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tiling.paired is in a transposed space of a 16-bit out where the fused walk is, converts rows
    (not KL's 0-d walk) and cpu_loops.PAIRED, with a constraint that keeps it to fused configs of
    half rows; without PAIRED the space keeps the hash it had, and a paired config is no point of it."""
    backend, scalar, full = _spaces_setting()
    monkeypatch.setattr(cpu_loops, "FUSED", True)
    half = cpu_loops.LINE // 2
    monkeypatch.setattr(cpu_loops, "PAIRED", False)
    without = backend.space(mse.FORMULA, scalar, torch.float16)
    monkeypatch.setattr(cpu_loops, "PAIRED", True)
    space = backend.space(mse.FORMULA, scalar, torch.float16)
    assert "paired" in dict(space.knobs) and "paired" not in dict(without.knobs)
    assert space.hash != without.hash and space.default == without.default
    assert "paired" not in dict(backend.space(kl_div.FORMULA_LOG, scalar, torch.float16).knobs)  # no form
    # float32's paired build let LLVM commute a multiply: another NaN's bits where two meet
    assert "paired" not in dict(backend.space(mse.FORMULA, scalar, torch.float32).knobs)
    assert "paired" in dict(backend.space(mse.FORMULA, scalar, torch.bfloat16).knobs)
    # KL's 0-d walk converts columns, where pairing lost: its full-gradient walk converts rows
    assert "paired" not in dict(backend.space(kl_div.FORMULA, scalar, torch.float16).knobs)
    assert "paired" in dict(backend.space(kl_div.FORMULA, full, torch.float16).knobs)
    assert set(cpu_loops._paired_walks()) == {
        (FusedForm.NEGATED_SCALE, False, half),
        (FusedForm.SCALED_DIFFERENCE, True, half),
        (FusedForm.SCALED_DIFFERENCE, False, half),
    }
    paired = Tiling(
        tile=4096, cores=2, variant=Variant.STRIDED, stream=True, transpose_row=half, fused=True, paired=True
    )
    assert paired.short() == f"strided tile=4096 cores=2 stream row={half}B fused paired"
    assert Tiling.from_dict(paired.to_dict()) == paired
    assert paired not in without
    rule = f"paired_fused: not paired or (fused and transpose_row == {half})"
    if half in cpu_loops.TRANSPOSE_ROWS:
        assert paired in space and space.violations(paired) == []
        assert space.violations(dataclasses.replace(paired, fused=False)) == [rule]
        assert space.violations(dataclasses.replace(paired, transpose_row=0)) == [rule]
    alone = tiling.cpu_transposed_space(
        backend.facts(), 1 << 14, 1 << 15, (4096,), (0, half), fused=True, paired_row=half
    )
    assert {c.paired for c in alone} == {False, True}
    assert all(c.fused and c.transpose_row == half for c in alone if c.paired)
    assert "paired" not in dict(tiling.cpu_transposed_space(backend.facts(), 1 << 14, 1 << 15, paired_row=half).knobs)


def test_paired_transposes_leave_column_j_of_both_blocks_side_by_side_in_slot_j() -> None:
    """_transpose_lanes' halves on (block, row, column) labels, through a stand-in builder whose
    shuffle_vector picks labels by the mask it is given (the masks are the IR's; nothing compiles,
    so any host runs it): for 16-bit (16 x 16, 8 lanes a 128-bit lane) and float32 (8 x 8, 4) half
    rows, and two other sizes, the result's slot j holds column j of block 0 then of block 1, each
    in row order: one whole line of out."""

    class Labels:
        def shuffle_vector(self, a: list, b: list, mask: object) -> list:
            return [(a + b)[m.constant] for m in mask.constant]

    for n, lane in ((16, 8), (8, 4), (32, 8), (4, 2)):
        rows = [[(0, r, c) for c in range(n)] + [(1, r, c) for c in range(n)] for r in range(n)]
        columns = cpu_loops._transpose_lanes(Labels(), rows, lane, halves=True)
        for j, column in enumerate(columns):
            assert column == [(b, r, j) for b in (0, 1) for r in range(n)], (n, lane, j)


def test_a_paired_transpose_of_float32_or_of_columns_does_not_type() -> None:
    """The paired intrinsic types 16-bit row walks alone: a float32 out (its build let LLVM commute
    a multiply and keep the other NaN) and KL's 0-d column walk find no implementation, whatever a
    space offers; the same calls on float16 rows compile (nothing runs: compile only) where a
    register holds the pair, a whole line (AVX-512), and find none elsewhere: LLVM itself would stop
    the process on the row's register."""
    import numba
    import numpy as np
    from numba import types

    half = cpu_loops.LINE // 2

    def caller(form: FusedForm, scalar_g: bool) -> Callable[..., None]:
        pair = cpu_loops._make_fused_transpose(form, half, False, paired=True)
        if scalar_g:
            return numba.njit(lambda g, x, t, o: pair(np.float32(g[0]), x, t, 0, 64, o, 0, 64, np.float32(1.0)))
        return numba.njit(lambda g, x, t, o: pair(g, x, t, 0, 64, o, 0, 64, np.float32(1.0)))

    cases = ((FusedForm.SCALED_DIFFERENCE, False), (FusedForm.SCALED_DIFFERENCE, True))
    for form, scalar_g in cases:
        with pytest.raises(numba.TypingError):
            caller(form, scalar_g).compile((types.float32[::1],) * 4)
        if not cpu_loops.target_features().get("avx512f", False):
            with pytest.raises(numba.TypingError):
                caller(form, scalar_g).compile((types.int16[::1],) * 4)
        elif cpu_loops.HAS_F16C:
            caller(form, scalar_g).compile((types.int16[::1],) * 4)
    assert not cpu_loops.fused_by_rows(FusedForm.NEGATED_SCALE, False)
    with pytest.raises(numba.TypingError):
        caller(FusedForm.NEGATED_SCALE, True).compile((types.int16[::1],) * 4)


def test_a_paired_config_is_refused_where_the_space_has_no_paired_knob(
    monkeypatch: pytest.MonkeyPatch, fused_offered: None
) -> None:
    """A paired config for KL's 0-d walk (it converts columns) or a float32 out is no point of its
    space: the call says so, naming the knob, before anything is written into out. The same config
    on mse float16 is taken, where the host offers paired half rows."""
    monkeypatch.setattr(cpu_loops, "PAIRED", True)
    half = cpu_loops.LINE // 2
    paired = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, transpose_row=half, fused=True, paired=True)
    for dtype in (torch.float16, torch.float32):
        t = _transposed((128, 1024), dtype, 7, SPECIAL)
        out = torch.full((128, 1024), 7.0, dtype=dtype)
        with pytest.raises(kernels.AclnnError, match="paired"):
            kernels.kl_div_backward(torch.tensor(0.5).to(dtype), t, t, "sum", False, config=paired, out=out)
        assert (out == 7.0).all()
    x = _transposed((128, 1024), torch.float32, 8, SPECIAL)
    with pytest.raises(kernels.AclnnError, match="paired"):
        kernels.mse_loss_backward(torch.tensor(0.5), x, x, "mean", config=paired)
    if half in cpu_loops.TRANSPOSE_ROWS:  # the control: a space that has the knob takes the config
        x = _transposed((128, 1024), torch.float16, 8, SPECIAL)
        kernels.mse_loss_backward(torch.tensor(0.5).half(), x, x, "mean", config=paired)


def test_restamp_lists_the_paired_walks_beside_the_fused_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """CpuBackend.built names every paired walk as PAIRED_WALK[form,scalar|full,row] (tuner.restamp
    compares what each compiled), apart from the fused walks of the same key."""
    monkeypatch.setattr(cpu_loops, "PAIRED_WALKS", _paired_walks())
    names = [name for name, _ in cpu.CpuBackend().built()]
    half = cpu_loops.LINE // 2
    for form, scalar in ((FusedForm.SCALED_DIFFERENCE, True), (FusedForm.NEGATED_SCALE, False)):
        key = f"{form.value},{'scalar' if scalar else 'full'},{half}"
        assert f"PAIRED_WALK[{key}] serial" in names and f"PAIRED_WALK[{key}] parallel" in names
    assert not any(n.startswith(f"PAIRED_WALK[negated_scale,scalar,{half}]") for n in names)
    assert sum(n.startswith("PAIRED_WALK[") for n in names) == 2 * 3


def _assert_gate(monkeypatch: pytest.MonkeyPatch, switch: str, gate: Callable[[], bool], forced_on: str) -> None:
    """A Zen-5-only gate: offered on the Zen 5 alone while ``switch`` is unset (not on the Xeon,
    LLVM's rocketlake, which has the walk knobs), on ``forced_on``'s CPU too where it is 1, on the
    Zen 5 not where it is 0; a value other than 0 or 1 refused by name (assert_cpu_pick)."""
    cases = (
        (None, "znver5", True),
        (None, "rocketlake", False),
        (None, "znver4", False),
        (None, "sapphirerapids", False),
        ("1", forced_on, True),
        ("0", "znver5", False),
    )
    assert_cpu_pick(monkeypatch, gate, switch, cases)


def test_paired_half_rows_are_offered_where_asked_and_a_bad_switch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """_paired: with the fused walk, half rows and AVX-512, the Zen 5 alone unless
    LOSSTUNE_CPU_PAIRED says; never without one of the three."""
    half = cpu_loops.LINE // 2
    monkeypatch.setattr(cpu_loops, "FUSED", True)
    monkeypatch.setattr(cpu_loops, "TRANSPOSE_ROWS", (0, half))
    monkeypatch.setattr(cpu_loops, "target_features", lambda: {"avx512f": True})
    _assert_gate(monkeypatch, "LOSSTUNE_CPU_PAIRED", cpu_loops._paired, "znver4")
    monkeypatch.setenv("LOSSTUNE_CPU_PAIRED", "1")
    for attribute, value in (("FUSED", False), ("TRANSPOSE_ROWS", (0,)), ("target_features", lambda: {})):
        with monkeypatch.context() as m:
            m.setattr(cpu_loops, attribute, value)
            assert cpu_loops._paired() is False, attribute


def test_the_fused_walk_needs_a_register_that_holds_a_transpose_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """_holds_a_row: half-line rows anywhere, whole-line (512-bit) rows with AVX-512 only (the
    walk's barrier asks for one register a row; LLVM aborts the process where none holds it), the
    register being the compile's (cpu_loops.vector_bytes) whatever revision of the loops builds."""
    for row_bytes, avx512f, want in ((32, False, True), (64, False, False), (64, True, True), (32, True, True)):
        monkeypatch.setattr(cpu_loops, "target_features", lambda f=avx512f: {"avx512f": f})
        assert cpu_loops.vector_bytes() == (cpu_loops.LINE if avx512f else cpu_loops.LINE // 2)
        assert cpu._holds_a_row(SimpleNamespace(TRANSPOSE_BYTES=row_bytes)) is want, (row_bytes, avx512f)


def test_the_fused_walk_is_offered_where_asked_and_a_bad_switch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """_fused: the Zen 5 alone unless LOSSTUNE_CPU_FUSED says, and never without F16C."""
    monkeypatch.setattr(cpu_loops, "HAS_F16C", True)
    _assert_gate(monkeypatch, "LOSSTUNE_CPU_FUSED", cpu_loops._fused, "znver3")
    monkeypatch.setattr(cpu_loops, "HAS_F16C", False)
    monkeypatch.setenv("LOSSTUNE_CPU_FUSED", "1")
    assert cpu_loops._fused() is False


def test_a_fused_config_is_refused_where_the_host_offers_none() -> None:
    """Without the knob a fused config is not in the space: the call says so, naming it, before
    anything is written into out."""
    refused_in_fresh_process(
        "fused=True",
        "kl_div_backward(torch.tensor(1.0), t, t, 'mean', False",
        {"LOSSTUNE_CPU_FUSED": "0", "LOSSTUNE_CPU_FUSED_0D": "0"},
    )


def test_kl_0d_is_offered_the_fused_walk_on_the_zen_4_alone_or_where_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """cpu.fused_0d_offered: the Zen 4 (znver4) alone while LOSSTUNE_CPU_FUSED_0D is unset (the Zen
    5 offers the walk to every form through cpu_loops.FUSED; the Xeon's rows lost), any host where
    it is 1, none where 0; never without F16C; a bad value is refused by name."""
    monkeypatch.setattr(cpu_loops, "HAS_F16C", True)
    cases = (
        (None, "znver4", True),
        (None, "znver5", False),
        (None, "rocketlake", False),
        (None, "znver3", False),
        ("1", "znver3", True),
        ("0", "znver4", False),
    )
    assert_cpu_pick(monkeypatch, cpu.fused_0d_offered, "LOSSTUNE_CPU_FUSED_0D", cases)
    monkeypatch.setattr(cpu_loops, "HAS_F16C", False)
    monkeypatch.setenv("LOSSTUNE_CPU_FUSED_0D", "1")
    assert cpu.fused_0d_offered() is False


def test_the_zen_4s_pick_offers_the_fused_walk_to_kl_0d_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where cpu_loops.FUSED is off and the backend's fused_0d on (the Zen 4's default), Tiling.fused
    is in the transposed space of KL without logTarget with a 0-d gradient, every dtype, and in no
    other (a full gradient, mse, logTarget), never paired; with the pick off every space keeps the
    hash it had, so only those entries of a table go stale where a host takes it."""
    backend, scalar, full = _spaces_setting()
    monkeypatch.setattr(cpu_loops, "FUSED", False)
    cases = [(kl_div.FORMULA, scalar, dtype, True) for dtype in DTYPES]
    cases += [(kl_div.FORMULA, full, torch.float16, False), (mse.FORMULA, scalar, torch.bfloat16, False)]
    cases += [(kl_div.FORMULA_LOG, scalar, torch.float16, False)]
    for formula, geo, dtype, offered in cases:
        backend.fused_0d = True
        space = backend.space(formula, geo, dtype)
        assert ("fused" in dict(space.knobs)) == offered and "paired" not in dict(space.knobs), (formula.name, dtype)
        backend.fused_0d = False
        without = backend.space(formula, geo, dtype)
        assert "fused" not in dict(without.knobs)
        assert (space.hash == without.hash) != offered and space.default == without.default, (formula.name, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_zen_4s_pick_runs_the_fused_walk_for_kl_0d_with_the_contiguous_bits(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    """With cpu_loops.FUSED off and the backend's fused_0d on, a fused config of KL's transposed 0-d
    call runs the fused walk (counted) and gives the contiguous call's bits; the same config for a
    full gradient is not a knob there, and is refused before out is written."""
    if not cpu_loops.HAS_F16C or not cpu._holds_a_row(cpu_loops):
        pytest.skip("the fused walk needs F16C and a register that holds a transpose row")
    monkeypatch.setattr(cpu_loops, "FUSED", False)
    monkeypatch.setattr(cpu.BACKEND, "fused_0d", True)
    dispatch.clear_plans()
    calls = _counted(monkeypatch)
    t = _transposed(FITS[1], dtype, 7, SPECIAL)
    g = torch.tensor(0.75).to(dtype)
    want = kernels.kl_div_backward(g, t.contiguous(), t.contiguous(), "mean", False)
    for config in _configs(dtype):
        got = kernels.kl_div_backward(g, t, t, "mean", False, config=config)
        assert torch.equal(as_bits(got), as_bits(want)), config.short()
    assert calls == [(FusedForm.NEGATED_SCALE, True, c.transpose_row, False) for c in _configs(dtype)]
    out = torch.full(t.shape, 7.0).to(dtype)
    with pytest.raises(kernels.AclnnError, match="fused is not a knob"):
        kernels.kl_div_backward(t, t, t, "none", False, out=out, config=next(_configs(dtype)))
    assert bool((out == 7).all())
    dispatch.clear_plans()
