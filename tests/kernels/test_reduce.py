"""KL's sum back to input's shape on the CPU (cpu_loops.reduce_walk, reduce_along_walk): the order
each output's terms are summed in, to the bit, and which geometries take which walk."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kernels
from kernels import backends, plan
from kernels.backends import cpu, cpu_loops
from kernels.modes import Reduction
from kernels.ops import kl_div

if not backends.probe("cpu")[0]:  # pragma: no cover - numba is a dependency
    pytest.skip("the CPU backend cannot load here", allow_module_level=True)


def _terms(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, reduction: str, log: bool) -> np.ndarray:
    """Each term of the sums at shape B, in float32: the flat loop over B of the formula the walks
    take (Formula.sum_value, else value; narrow_value for a 16-bit out of a one-value gradient),
    with the op's cof, into a float32 array (its value, unrounded)."""
    space = torch.broadcast_shapes(x.shape, t.shape)
    formula = kl_div.FORMULA_LOG if log else kl_div.FORMULA
    gb, tb = (v.expand(space).contiguous() for v in (g, t))
    out = torch.zeros(space, dtype=torch.float32)
    cof = kl_div.cof(Reduction.parse(reduction, allow_batchmean=True), tuple(space))
    narrow = x.dtype != torch.float32 and g.numel() == 1
    # Named apart from the backend's own pick (_loop_set), so that this test checks it.
    loops = cpu.BACKEND.kernels(formula, True) if narrow else cpu.BACKEND.kernels(formula, summed=True)
    flat = loops.flat[0]
    ptrs, tags = (gb.data_ptr(), tb.data_ptr(), tb.data_ptr(), out.data_ptr()), (gb, tb, tb, out)
    flat(*ptrs, *(cpu.TAGS[v.dtype] for v in tags), out.numel(), cof, 4096, 0, 1, False)
    return out.numpy()


_ZERO = np.float32(0)


def _kahan(values: np.ndarray, acc: np.float32 = _ZERO, comp: np.float32 = _ZERO) -> tuple[np.float32, np.float32]:
    """The walks' compensated sum, one float32 operation at a time: (sum, compensation)."""
    for v in values:
        y = np.float32(v - comp)
        tot = np.float32(acc + y)
        comp = np.float32(np.float32(tot - acc) - y)
        acc = tot
    return acc, comp


def _grouped(row: np.ndarray, run: int) -> np.float32:
    """reduce_walk's order: each run of ``run`` terms (the innermost summed dim, as planned) in
    groups of REDUCE_TERMS from its start, a group's values added in float32 left to right, then
    Kahan-summed group by group; the run's last run % REDUCE_TERMS terms Kahan-summed one by one."""
    size = cpu_loops.REDUCE_TERMS
    acc = comp = _ZERO
    for start in range(0, row.size, run):
        seg = row[start : start + run]
        whole = run // size * size
        for k in range(0, whole, size):
            part = seg[k]
            for v in seg[k + 1 : k + size]:
                part = np.float32(part + v)
            acc, comp = _kahan(np.array([part]), acc, comp)
        acc, comp = _kahan(seg[whole:], acc, comp)
    return acc


def _summed(x: torch.Tensor, terms: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """terms as (outputs, summed elements in ascending linear order), and B's summed dims."""
    lead = terms.ndim - x.dim()
    shape = (1,) * lead + tuple(x.shape)
    summed = [d for d in range(terms.ndim) if shape[d] == 1 and terms.shape[d] > 1]
    kept = [d for d in range(terms.ndim) if d not in summed]
    moved = np.transpose(terms, kept + summed)
    return moved.reshape(int(np.prod([terms.shape[d] for d in kept])), -1), summed


def _geometry(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> plan.Geometry:
    return plan.reduce_geometry(g, x, t, torch.empty_like(x), tuple(torch.broadcast_shapes(x.shape, t.shape)))


def _along(g: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> bool:
    return cpu._reduce_build(_geometry(g, x, t), 2)[0]  # KL never reads self: its loops read target there


CASES = {
    # (grad, input, target) shapes
    "rows summed, a 0-d gradient": ((), (300,), (64, 300)),
    "rows summed, a full gradient": ((64, 300), (300,), (64, 300)),
    "a leading and an inner dim summed": ((2, 3, 5, 4), (3, 1, 4), (2, 3, 5, 4)),
    # A group of REDUCE_TERMS (4) terms per pass, then the 3 left one at a time.
    "seven rows summed, a full gradient": ((7, 300), (300,), (7, 300)),
    # One output, one lane: its sum in registers (7 groups, 2 alone).
    "one short sum": ((), (1,), (30,)),
    # Strided lanes over runs shorter than a transpose's side, staged term by term.
    "runs shorter than a side, a full gradient": ((40, 7), (40, 1), (40, 7)),
    "short runs summed per row": ((), (40, 1), (40, 50)),
    # The strided lanes' blocked walk (cpu_loops.REDUCE_BLOCK_LANES): a second block of lanes, a
    # gradient transposed beside the target, a run that ends in part of a transpose's side.
    "short runs, more rows than a block, a full gradient": ((300, 24), (300, 1), (300, 24)),
    # ... and a summed dim outside the run (the runs of one output taken in order).
    "short runs and a leading dim summed": ((), (20, 1), (3, 20, 40)),
}


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.bfloat16), ids=str)
@pytest.mark.parametrize("log", (False, True), ids=("plain", "log_target"))
@pytest.mark.parametrize("case", CASES)
def test_across_outputs_each_sum_runs_in_ascending_groups_to_the_bit(case: str, log: bool, dtype: torch.dtype) -> None:
    gs, xs, ts = CASES[case]
    gen = torch.Generator().manual_seed(11)
    g, x, t = (torch.randn(s, generator=gen).to(dtype) for s in (gs, xs, ts))
    assert not _along(g, x, t)
    rows, _ = _summed(x, _terms(g, x, t, "mean", log))
    run = int(_geometry(g, x, t).rshape[-1])
    expected = np.array([_grouped(row, run) for row in rows], np.float32)
    got = kernels.kl_div_backward(g, x, t, "mean", log, backend="cpu")
    want = torch.from_numpy(expected).to(dtype).reshape(x.shape)
    assert torch.equal(
        got.view(-1).view(torch.int16 if dtype != torch.float32 else torch.int32),
        want.view(-1).view(torch.int16 if dtype != torch.float32 else torch.int32),
    )


def _lanes_order(row: np.ndarray, run: int) -> np.float32:
    """reduce_along_walk's order: element p of each run to lane p % REDUCE_LANES, each lane a Kahan
    sum in ascending order; then the lanes' compensations summed in lane order, and the lanes
    Kahan-summed in lane order from that compensation."""
    lanes = cpu_loops.REDUCE_LANES
    p = np.arange(row.size) % run
    states = [_kahan(row[p % lanes == j]) for j in range(lanes)]
    c1 = _ZERO
    for _, comp in states:
        c1 = np.float32(c1 + comp)
    total, _ = _kahan(np.array([acc for acc, _ in states], np.float32), comp=c1)
    return total


ALONG = {
    # (grad, input, target) shapes; run: the innermost summed dim's length
    "one output, a 0-d gradient": ((), (1,), (5000,)),
    "(N, 1) against (N, C), a full gradient": ((3, 3000), (3, 1), (3, 3000)),
    "a ragged run, summed over two dims": ((), (1, 4, 1), (9, 4, 300)),
}


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize("log", (False, True), ids=("plain", "log_target"))
@pytest.mark.parametrize("case", ALONG)
def test_along_the_summed_dims_each_sum_runs_in_fixed_lanes_to_the_bit(
    case: str, log: bool, dtype: torch.dtype
) -> None:
    gs, xs, ts = ALONG[case]
    gen = torch.Generator().manual_seed(12)
    g, x, t = (torch.randn(s, generator=gen).to(dtype) for s in (gs, xs, ts))
    assert _along(g, x, t)
    terms = _terms(g, x, t, "sum", log)
    rows, summed = _summed(x, terms)
    expected = np.array([_lanes_order(row, terms.shape[summed[-1]]) for row in rows], np.float32)
    got = kernels.kl_div_backward(g, x, t, "sum", log, backend="cpu")
    want = torch.from_numpy(expected).to(dtype).reshape(x.shape)
    bits = torch.int16 if dtype != torch.float32 else torch.int32
    assert torch.equal(got.reshape(-1).view(bits), want.reshape(-1).view(bits))
    if dtype == torch.float32:  # SEMANTICS: a broadcast sum within 1e-5 of the summed magnitudes
        ref = kl_div.reference(g, x, t, "sum", log)
        scale = torch.from_numpy(np.abs(terms)).double().sum_to_size(x.shape)
        assert ((got.double() - ref).abs() <= 1e-5 * scale).all()


def test_which_geometries_sum_along_their_summed_dims() -> None:
    """Long unit-stride runs of target, REDUCE_ALONG_SUM terms or more per output; the rest across
    outputs (a strided run, a short sum, a gradient strided along the run)."""
    z = torch.zeros
    n = cpu_loops.REDUCE_ALONG_SUM
    assert _along(z(()), z(1), z(n))
    assert not _along(z(()), z(1), z(n - 1))  # too short a sum for the lanes' own summing
    assert not _along(z(()), z(n), z(64, n))  # rows summed: the run is strided, across outputs is contiguous
    assert not _along(z(()), z(n, 1), z(n, 2 * n).t().contiguous().t())  # target strided along the run
    assert _along(z(8, n), z(8, 1), z(8, n)) and not _along(z(n, 8).t(), z(8, 1), z(8, n))
    assert _along(z(()), z(1, 5, 1), z(40, 5, 64))  # runs of REDUCE_LANES, 40 of them per output
