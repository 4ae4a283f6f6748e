"""The CPU backend's transposed walk (cpu_loops.transposed): 2-d problems whose inputs are
transposed views and whose out is contiguous go through tiles of 16 KiB (64 columns by 64 rows of
float32 or 128 of a 16-bit type), square register transposes inside them (rows of a whole line
with AVX-512, of half a line without: cpu_loops.TRANSPOSE_BYTES; half a line too where a config
says so on a CPU that splits 512-bit operations: cpu_loops.TRANSPOSE_ROWS; in pairs, then a last
odd one)
and element-wise copies at ragged edges; a large line-aligned out is stored
non-temporally. Every shape class below must give bitwise what the same call on contiguous
copies gives (the formula is elementwise, so the layout may not change a bit), for every dtype,
gradient kind and core count. The planner marks these problems Layout.TRANSPOSED, whose space
tunes cores, the stream flag and, where offered, the tile and the row (tiling.cpu_transposed_space)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache

import numpy as np
import pytest
import torch
from numba import njit

import kernels
from kernels import tiling
from kernels.backends import cpu, cpu_loops
from kernels.modes import Variant
from kernels.tiling import Tiling
from tests.helpers import as_bits, assert_cpu_pick, refused_in_fresh_process, run_fresh

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# (rows, cols) of out: tile multiples, ragged in either dim, narrower than one register block;
# out's columns are the tile's rows: 48 leaves one float32 block after a pair and one 16-bit block
# alone, 96 and 320 whole pairs and odd blocks in both.
SHAPES = ((128, 64), (130, 77), (64, 200), (5, 300), (300, 3), (9, 9), (40, 48), (40, 96), (70, 320))
CALLS = {
    "mse": lambda g, x, t, **kw: kernels.mse_loss_backward(g, x, t, "none", **kw),
    "l1": lambda g, x, t, **kw: kernels.l1_loss_backward(g, x, t, "none", **kw),
    "kl_div": lambda g, x, t, **kw: kernels.kl_div_backward(g, x, t, "none", False, **kw),
    "kl_div-log": lambda g, x, t, **kw: kernels.kl_div_backward(g, x, t, "none", True, **kw),
}


pytestmark = pytest.mark.usefixtures("cpu_backend")


def _transposed(shape: tuple[int, int], dtype: torch.dtype, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(shape[::-1], generator=gen).to(dtype).t()


def _bits(v: torch.Tensor) -> torch.Tensor:
    return v.view(torch.int32 if v.dtype == torch.float32 else torch.int16)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", CALLS)
@pytest.mark.parametrize("grad", ["full", "0-d", "row"])
def test_transposed_inputs_give_the_contiguous_bits(
    op: str, dtype: torch.dtype, shape: tuple[int, int], grad: str
) -> None:
    x, t = _transposed(shape, dtype, 1), _transposed(shape, dtype, 2)
    g = {
        "full": _transposed(shape, dtype, 3),
        "0-d": torch.tensor(0.75).to(dtype),
        "row": torch.randn(shape[1], generator=torch.Generator().manual_seed(4)).to(dtype),  # stride 0 on dim 0
    }[grad]
    call = CALLS[op]
    want = call(g.contiguous(), x.contiguous(), t.contiguous(), backend="cpu")
    for cores in sorted({1, min(2, cpu_loops.max_threads())}):  # 2 splits the tiles round-robin
        got = call(g, x, t, backend="cpu", config=Tiling(tile=4096, cores=cores, variant=Variant.STRIDED))
        assert got.is_contiguous()
        assert torch.equal(_bits(got), _bits(want)), (cores, shape)


def _mover(transpose: object) -> object:
    """A jitted caller of one register-transpose intrinsic (intrinsics run only inside numba). The
    sfence orders a streamed transpose's stores before the test reads dst; after ordinary stores
    it changes nothing."""

    @njit
    def move(src, s0, ss, dst, d0, ds):
        transpose(src, s0, ss, dst, d0, ds)
        cpu_loops._sfence()

    return move


ROW_BYTES = (cpu_loops.LINE, cpu_loops.LINE // 2)  # both compile on any x86 host (LLVM splits wider vectors)


@cache
def _movers(row_bytes: int) -> cpu_loops._Transposes:
    """The four register transposes of one row width, each behind a jitted caller."""
    return cpu_loops._Transposes(
        *(_mover(cpu_loops._make_transpose(stream, blocks, row_bytes)) for blocks in (1, 2) for stream in (False, True))
    )


def _check_block_move(move: object, dtype: type, ds: int, line_aligned: bool, row_bytes: int, blocks: int = 1) -> None:
    """``blocks`` blocks stacked in src (rows 40 apart, from element 5) moved into dst (columns
    ``ds`` apart, block b on row b of each): every element where the transpose puts it, the rest
    of dst untouched. ``line_aligned``: the first column starts on a row boundary (the streamed
    stores need it), else at element 7."""
    n = cpu_loops._block(np.dtype(dtype).itemsize, row_bytes)  # whole lines: 16 float32, 32 16-bit
    src = (np.arange(40 * (blocks * n + 1)) * 3 + 1).astype(dtype)
    dst = np.zeros(ds * (n + 2), dtype)
    d0 = (-(dst.ctypes.data // dst.itemsize)) % n if line_aligned else 7
    move(src, np.uint64(5), np.uint64(40), dst, np.uint64(d0), np.uint64(ds))
    want = np.zeros_like(dst)
    for i in range(blocks * n):
        for j in range(n):
            want[d0 + j * ds + i] = src[5 + i * 40 + j]
    assert np.array_equal(dst, want)


@pytest.mark.parametrize("row_bytes", ROW_BYTES)
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint16], ids=str)
def test_register_transpose_moves_one_block(dtype: type, row_bytes: int) -> None:
    """A square block of one row a side, columns 41 elements apart (not aligned)."""
    _check_block_move(_movers(row_bytes).block, dtype, 41, line_aligned=False, row_bytes=row_bytes)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["mse", "kl_div-log"])
@pytest.mark.parametrize("cols", [160, 77], ids=["rows-whole-lines", "rows-mid-line"])
def test_streamed_out_gives_the_contiguous_bits(op: str, dtype: torch.dtype, cols: int) -> None:
    """A config that streams takes the non-temporal stores where out's lines allow it, and the
    ordinary ones where they do not (77 columns: most rows start mid-line, where a non-temporal
    vector store would fault and end the process); ragged edges go element by element."""
    rows = 67  # 64 whole-tile rows plus a ragged 3
    shape = (rows, cols)
    x, t, g = (_transposed(shape, dtype, seed) for seed in (1, 2, 3))
    out = torch.empty(shape, dtype=dtype)
    assert cpu._line_aligned(out, cols) == (cols == 160)
    want = CALLS[op](g.contiguous(), x.contiguous(), t.contiguous(), backend="cpu")
    for cores in sorted({1, min(2, cpu_loops.max_threads())}):
        config = Tiling(tile=tiling.CPU_TRANSPOSED_TILE, cores=cores, variant=Variant.STRIDED, stream=True)
        got = CALLS[op](g, x, t, backend="cpu", out=out, config=config)
        assert torch.equal(_bits(got), _bits(want)), cores


def test_streaming_needs_a_line_aligned_out() -> None:
    """The rule that keeps a non-temporal store off a misaligned address (it would fault)."""
    base = torch.empty(64 * 1024 + 64)  # torch's CPU allocator aligns to 64 bytes
    assert base.data_ptr() % cpu_loops.LINE == 0
    assert cpu._line_aligned(base[: 64 * 1024], 1024)
    assert not cpu._line_aligned(base[1 : 64 * 1024 + 1], 1024)  # starts 4 bytes into a line
    assert not cpu._line_aligned(base[: 64 * 1000], 1000)  # rows 4000 bytes apart: most start mid-line


def test_plumbing_with_a_spy_kernel_the_launch_streams_where_the_config_and_out_allow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plumbing only: a spy stands in for the compiled walk and records the stream flag the launch
    hands it, for each config and out alignment."""
    seen: list[bool] = []
    real = cpu.BACKEND.kernels

    def spied(formula: object, narrow: bool = False, **picks: bool) -> cpu_loops.CpuKernels:
        spy = lambda *args: seen.append(bool(args[-1]))  # noqa: E731
        loops = real(formula, narrow, **picks)  # summed, half, coarse: whatever the backend picks by
        return dataclasses.replace(loops, transposed={(tiling.CPU_TRANSPOSED_TILE, 0): (spy, spy)})

    monkeypatch.setattr(cpu.BACKEND, "kernels", spied)
    shape = (64, 160)
    x, t = _transposed(shape, torch.float32, 1), _transposed(shape, torch.float32, 2)
    base = torch.empty(64 * 160 + 16)
    for stream, out in ((True, base[: 64 * 160]), (False, base[: 64 * 160]), (True, base[1 : 64 * 160 + 1])):
        config = Tiling(tile=tiling.CPU_TRANSPOSED_TILE, cores=1, variant=Variant.STRIDED, stream=stream)
        kernels.mse_loss_backward(torch.tensor(1.0), x, t, "mean", out=out.view(shape), backend="cpu", config=config)
    assert seen == [True, False, False]


@pytest.mark.parametrize("row_bytes", ROW_BYTES)
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint16], ids=str)
def test_streamed_register_transpose_moves_one_block(dtype: type, row_bytes: int) -> None:
    """The non-temporal twin of the block move, into aligned columns three rows apart."""
    n = cpu_loops._block(np.dtype(dtype).itemsize, row_bytes)
    _check_block_move(_movers(row_bytes).block_nt, dtype, 3 * n, line_aligned=True, row_bytes=row_bytes)


@pytest.mark.parametrize("row_bytes", ROW_BYTES)
@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint16], ids=str)
def test_pair_transpose_moves_two_stacked_blocks(dtype: type, row_bytes: int) -> None:
    """Two blocks, rows 0..n-1 and n..2n-1 of src, onto rows 0 and 1 of each column, with
    ordinary stores (columns 3 rows + 9 elements apart, not aligned) and with streamed ones."""
    n = cpu_loops._block(np.dtype(dtype).itemsize, row_bytes)
    movers = _movers(row_bytes)
    _check_block_move(movers.pair, dtype, 3 * n + 9, line_aligned=False, row_bytes=row_bytes, blocks=2)
    _check_block_move(movers.pair_nt, dtype, 3 * n, line_aligned=True, row_bytes=row_bytes, blocks=2)


@pytest.mark.parametrize(("n", "lane"), [(16, 4), (32, 8), (8, 8), (16, 16)])
def test_unpack_rounds_leave_every_column_whole(n: int, lane: int) -> None:
    """The in-lane unpack rounds on (row, column) labels: every slot ends as one whole column in
    row order, and _column_slots finds each column once."""
    labels = [[(r, c) for c in range(n)] for r in range(n)]
    slots = cpu_loops._run_rounds(labels, lane, lambda a, b, mask: [(a + b)[m] for m in mask])
    order = cpu_loops._column_slots(n, lane)
    assert sorted(order) == list(range(n))
    for j, slot in enumerate(order):
        assert slots[slot] == [(r, j) for r in range(n)]


@pytest.mark.parametrize("row_bytes", ROW_BYTES)
def test_store_order_stores_every_column_of_every_block_once(row_bytes: int) -> None:
    """Whole-line rows: rounds whose stores alternate between the two blocks' lines. Half-line rows:
    the two halves of each output line (block 0's column j, then block 1's) one after the other."""
    n = row_bytes // 4
    for blocks in (1, 2):
        order = cpu_loops._store_order(blocks, n, row_bytes)
        assert sorted(order) == [(b, j) for b in range(blocks) for j in range(n)]
    pair = cpu_loops._store_order(2, n, row_bytes)
    if row_bytes == cpu_loops.LINE:
        assert all(pair[i][0] != pair[i + 1][0] for i in range(n - 1))  # round 0 alternates lines
    else:
        assert all(pair[2 * j : 2 * j + 2] == [(0, j), (1, j)] for j in range(n))


def test_a_bad_transpose_width_is_refused_naming_the_variable() -> None:
    code = "try:\n    from kernels.backends import cpu_loops\nexcept ValueError as e:\n    print(e)\n"
    printed = run_fresh(code, {"LOSSTUNE_CPU_TRANSPOSE_BYTES": "48"})
    assert printed == "LOSSTUNE_CPU_TRANSPOSE_BYTES: expected 64 or 32, got '48'"


@pytest.mark.parametrize("row", cpu_loops.TRANSPOSE_ROWS)
@pytest.mark.parametrize("tile", cpu_loops.TRANSPOSED_TILES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_tile_and_row_the_host_offers_gives_the_contiguous_bits(tile: int, row: int, dtype: torch.dtype) -> None:
    """Each tile the backend offers (taller buffers without AVX-512) with each register row it
    offers (half rows on a CPU that splits 512-bit operations), ragged edges included, 1 and 2
    cores, streamed or not: bitwise the contiguous call's result."""
    assert tiling.CPU_TRANSPOSED_TILE in cpu_loops.TRANSPOSED_TILES
    for shape in ((64, 1000), (70, 320), (130, 77)):
        gen = torch.Generator().manual_seed(3)
        x, t, g = (torch.randn(shape[::-1], generator=gen).to(dtype).t() for _ in range(3))
        want = kernels.kl_div_backward(g.contiguous(), x.contiguous(), t.contiguous(), "none", True)
        for cores, stream in ((1, False), (2, True)):
            config = Tiling(tile=tile, cores=cores, variant=Variant.STRIDED, stream=stream, transpose_row=row)
            got = kernels.kl_div_backward(g, x, t, "none", True, config=config)
            assert torch.equal(as_bits(got), as_bits(want)), (shape, cores, stream)


def test_half_rows_are_offered_only_on_whole_line_hosts_that_ask(monkeypatch: pytest.MonkeyPatch) -> None:
    """_transpose_rows: half rows beside the host's own where its rows are whole lines and its CPU
    is offered the walk knobs, Zen 4 and Zen 5 (or the switch says so); never where the host's rows
    are already half lines; a bad switch is refused naming it."""
    monkeypatch.setattr(cpu_loops, "TRANSPOSE_BYTES", cpu_loops.LINE)
    monkeypatch.setattr(cpu_loops, "target_features", lambda: {"avx512f": True})
    for switch, cpu_name, want in (
        (None, "znver4", (0, 32)),
        (None, "znver5", (0, 32)),
        (None, "rocketlake", (0, 32)),
        (None, "sapphirerapids", (0,)),
        ("1", "sapphirerapids", (0, 32)),
        ("0", "znver4", (0,)),
    ):
        monkeypatch.setattr(cpu_loops, "target_cpu", lambda name=cpu_name: name)
        if switch is None:
            monkeypatch.delenv("LOSSTUNE_CPU_HALF_ROWS", raising=False)
        else:
            monkeypatch.setenv("LOSSTUNE_CPU_HALF_ROWS", switch)
        assert cpu_loops._transpose_rows() == want, (switch, cpu_name)
    monkeypatch.setattr(cpu_loops, "TRANSPOSE_BYTES", cpu_loops.LINE // 2)
    monkeypatch.setenv("LOSSTUNE_CPU_HALF_ROWS", "1")
    assert cpu_loops._transpose_rows() == (0,)
    monkeypatch.setenv("LOSSTUNE_CPU_HALF_ROWS", "yes")
    with pytest.raises(ValueError, match="LOSSTUNE_CPU_HALF_ROWS: expected 0 or 1, got 'yes'"):
        cpu_loops._transpose_rows()


def test_a_half_row_config_is_refused_where_the_host_offers_none() -> None:
    """Without the knob a config naming half rows is not in the space: the call says so before
    anything is written."""
    refused_in_fresh_process("transpose_row=32", "mse_loss_backward(t, t, t, 'none'", {"LOSSTUNE_CPU_HALF_ROWS": "0"})


def test_the_inputs_first_order_is_offered_only_for_a_target_only_formula_with_a_0d_gradient(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The knob is in the space only where the walk applies (KL, mean/sum) and the host offers it;
    elsewhere the space, and its hash, are the ones without it."""
    from kernels import plan
    from kernels.ops import kl_div, mse

    backend = cpu.CpuBackend()
    backend.fused_0d = False  # the fused knob's, tested apart (test_fused_walk)
    x = torch.randn(256, 64).t()
    monkeypatch.setattr(cpu_loops, "INPUTS_FIRST", True)
    monkeypatch.setattr(cpu_loops, "FUSED", False)  # its knob, tested apart (test_fused_walk)
    cases = {
        "kl_div 0-d": (kl_div.FORMULA, torch.tensor(1.0), True),
        "kl_div-log 0-d": (kl_div.FORMULA_LOG, torch.tensor(1.0), True),
        "kl_div full": (kl_div.FORMULA, x, False),
        "mse 0-d": (mse.FORMULA, torch.tensor(1.0), False),
    }
    for label, (formula, g, offered) in cases.items():
        geo = plan.elementwise_geometry(g, x, x, torch.empty(64, 256), (64, 256))
        space = backend.space(formula, geo, torch.float32)
        assert ("transpose_in" in dict(space.knobs)) == offered, label
        without = tiling.cpu_transposed_space(
            backend.facts(), geo.numel, geo.n_out * 4, cpu_loops.TRANSPOSED_TILES, cpu_loops.TRANSPOSE_ROWS
        )
        assert (space.hash == without.hash) != offered and space.default == without.default, label
    first = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, transpose_in=True)
    assert first.short() == "strided tile=4096 cores=2 inputs-first" and Tiling.from_dict(first.to_dict()) == first
    monkeypatch.setattr(cpu_loops, "INPUTS_FIRST", False)
    geo = plan.elementwise_geometry(torch.tensor(1.0), x, x, torch.empty(64, 256), (64, 256))
    assert "transpose_in" not in dict(backend.space(kl_div.FORMULA, geo, torch.float32).knobs)


@pytest.mark.parametrize(
    ("offered", "switch"),
    [(cpu_loops._inputs_first, "LOSSTUNE_CPU_INPUTS_FIRST"), (cpu_loops._deferred, "LOSSTUNE_CPU_DEFERRED")],
    ids=["inputs-first", "deferred"],
)
def test_a_knob_cpu_walk_is_offered_where_asked_and_a_bad_switch_is_refused(
    monkeypatch: pytest.MonkeyPatch, offered: Callable[[], bool], switch: str
) -> None:
    """Tiling.transpose_in and Tiling.defer_out: offered on the knob CPUs (Zen 4, Zen 5, the Xeon's
    rocketlake) with AVX-512 alone unless their switch says: a Zen 4 whose AVX-512 is hidden (a VM
    with AVX2 only) keeps the AVX2 tier's spaces, and so its table's entries."""
    for value, cpu_name, avx512, want in (
        (None, "znver4", True, True),
        (None, "znver5", True, True),
        (None, "rocketlake", True, True),
        (None, "sapphirerapids", True, False),
        (None, "znver3", False, False),
        (None, "znver4", False, False),
        ("1", "znver4", False, True),
        ("1", "x", False, True),
    ):
        monkeypatch.setattr(cpu_loops, "target_cpu", lambda name=cpu_name: name)
        monkeypatch.setattr(cpu_loops, "target_features", lambda on=avx512: {"avx2": True, "avx512f": on})
        if value is None:
            monkeypatch.delenv(switch, raising=False)
        else:
            monkeypatch.setenv(switch, value)
        assert offered() is want, (value, cpu_name, avx512)
    monkeypatch.setenv(switch, "0")
    monkeypatch.setattr(cpu_loops, "target_cpu", lambda: "znver4")
    monkeypatch.setattr(cpu_loops, "target_features", lambda: {"avx512f": True})
    assert offered() is False
    for bad in ("on", "yes"):
        monkeypatch.setenv(switch, bad)
        with pytest.raises(ValueError, match=f"{switch}: expected 0 or 1, got '{bad}'"):
            offered()


def test_an_inputs_first_config_is_refused_where_the_host_offers_none() -> None:
    refused_in_fresh_process(
        "transpose_in=True",
        "kl_div_backward(torch.tensor(1.0), t, t, 'mean', False",
        {"LOSSTUNE_CPU_INPUTS_FIRST": "0"},
    )


def test_deferring_is_offered_for_16_bit_outs_and_never_with_inputs_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """defer_out is in the space for a 16-bit out on a host that offers it; a float32 space, and its
    hash, are the ones without it unless the host offers the walk to float32 outs (deferred_wide);
    where inputs-first is a knob too, no config takes both."""
    from kernels import plan
    from kernels.ops import kl_div, mse

    backend = cpu.CpuBackend()
    backend.fused_0d = False  # the fused knob's, tested apart (test_fused_walk)
    x = torch.randn(256, 64).t()
    monkeypatch.setattr(cpu_loops, "DEFERRED", True)
    monkeypatch.setattr(cpu_loops, "INPUTS_FIRST", True)
    monkeypatch.setattr(cpu_loops, "FUSED", False)  # its knob, tested apart (test_fused_walk)
    backend.deferred_wide = False
    full = plan.elementwise_geometry(x, x, x, torch.empty(64, 256), (64, 256))
    for dtype, offered in ((torch.float32, False), (torch.float16, True), (torch.bfloat16, True)):
        space = backend.space(mse.FORMULA, full, dtype)
        assert ("defer_out" in dict(space.knobs)) == offered, dtype
        out_bytes = full.n_out * dtype.itemsize
        without = tiling.cpu_transposed_space(
            backend.facts(), full.numel, out_bytes, cpu_loops.TRANSPOSED_TILES, cpu_loops.TRANSPOSE_ROWS
        )
        assert (space.hash == without.hash) != offered and space.default == without.default, dtype
    geo = plan.elementwise_geometry(torch.tensor(1.0), x, x, torch.empty(64, 256), (64, 256))
    space = backend.space(kl_div.FORMULA, geo, torch.float16)
    assert {"defer_out", "transpose_in"} <= set(dict(space.knobs))
    both = Tiling(tile=4096, cores=1, variant=Variant.STRIDED, transpose_in=True, defer_out=True)
    assert both not in space and space.violations(both) == ["one_walk_order: not (transpose_in and defer_out)"]
    assert any(c.defer_out for c in space) and any(c.transpose_in for c in space)
    deferred = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, stream=True, defer_out=True)
    assert deferred.short() == "strided tile=4096 cores=2 stream deferred"
    assert Tiling.from_dict(deferred.to_dict()) == deferred
    # A float32 out: KL log_target (compute-bound) with a 0-d gradient, where the host offers it.
    for wide in (False, True):
        backend.deferred_wide = wide
        for formula, geometry, offered in (
            (kl_div.FORMULA_LOG, geo, wide),
            (kl_div.FORMULA_LOG, full, False),  # the full gradient's rows lost (section 107)
            (kl_div.FORMULA, geo, False),  # not compute-bound
            (mse.FORMULA, geo, False),
        ):
            space = backend.space(formula, geometry, torch.float32)
            assert ("defer_out" in dict(space.knobs)) == offered, (wide, formula.name, geometry.grad_kind)
            assert (deferred in space) == offered
    monkeypatch.setattr(cpu_loops, "DEFERRED", False)
    assert "defer_out" not in dict(backend.space(kl_div.FORMULA, geo, torch.float16).knobs)
    assert "defer_out" not in dict(backend.space(kl_div.FORMULA_LOG, geo, torch.float32).knobs)


def test_a_deferred_config_is_refused_where_the_host_offers_none() -> None:
    refused_in_fresh_process(
        "defer_out=True", "mse_loss_backward(t.half(), t.half(), t.half(), 'none'", {"LOSSTUNE_CPU_DEFERRED": "0"}
    )


def test_the_deferred_walk_is_offered_to_float32_outs_on_the_xeon_alone_or_where_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """cpu.deferred_wide_offered: the CPU numba compiles for (rocketlake; not the other knob CPUs,
    whose float32 rows lost), or LOSSTUNE_CPU_DEFERRED_WIDE on any host; a bad value is refused."""
    cases = (
        (None, "rocketlake", True),
        (None, "znver4", False),
        (None, "znver5", False),
        ("1", "znver4", True),
        ("0", "rocketlake", False),
    )
    assert_cpu_pick(monkeypatch, cpu.deferred_wide_offered, "LOSSTUNE_CPU_DEFERRED_WIDE", cases)


def test_a_float32_deferred_config_is_refused_where_the_host_offers_it_16_bit_outs_alone() -> None:
    refused_in_fresh_process(
        "defer_out=True",
        "kl_div_backward(torch.tensor(0.5), t, t, 'mean', True",
        {"LOSSTUNE_CPU_DEFERRED": "1", "LOSSTUNE_CPU_DEFERRED_WIDE": "0"},
    )
