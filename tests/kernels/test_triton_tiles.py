"""The Triton backends' 2-d tile walk (triton_loops._loss_bwd_strided2d_kernel): every strided call
of one or two coalesced dims goes through it on CUDA and under the interpreter, tiles ragged on both
dims, and the tile split (BM x BN) follows the inner dim. And the Triton reduce walk's order: each
output's terms split over lanes by the geometry, each lane Kahan-summed in ascending order and the
lanes added in order, to the bit, whatever the config."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kernels
from kernels import backends
from kernels.modes import Variant
from kernels.tiling import Tiling
from tests.helpers import DTYPES, assert_within, ulps_for


def test_tile_split_keeps_the_inner_dim_whole_where_it_fits(triton_backend: str) -> None:
    from kernels.backends import triton_loops

    assert triton_loops.tile_2d(1024, 64) == (16, 64)  # transposed 64-row views: 16 x 64
    assert triton_loops.tile_2d(1024, 65536) == (1, 1024)  # a long inner dim: one row per tile
    assert triton_loops.tile_2d(1024, 37) == (16, 64)  # ragged: the next power of two
    assert triton_loops.tile_2d(256, 1) == (256, 1)  # inner dim of one: a column of 256
    for tile in (256, 1024, 8192):
        for cols in (1, 3, 64, 100, 5000):
            bm, bn = triton_loops.tile_2d(tile, cols)
            assert bm * bn == tile and bm & (bm - 1) == 0 and bn & (bn - 1) == 0


def _views(kind: str, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(11)

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=gen).to(dtype).to(device)

    if kind == "transposed":  # inputs (37, 70) as transposed views, out contiguous: inner dim 37 < BN
        return rand(70, 37).t(), rand(70, 37).t(), rand(70, 37).t()
    if kind == "broadcast":  # target one row over 5 rows of 1000
        return rand(5, 1000), rand(5, 1000), rand(1, 1000).expand(5, 1000)
    if kind == "sliced":  # x's rows 1024 apart, the others' 1000: a 2-d walk, unit stride inside
        return rand(3, 1000), rand(3, 1024)[:, :1000], rand(3, 1000)
    if kind == "column":  # target one column broadcast along the rows: stride 0 on the inner dim
        return rand(5, 1000), rand(5, 1000), rand(5, 1).expand(5, 1000)
    return rand(999), rand(2997)[::3], rand(999)  # "1-d": one strided dim, walked as (1, 999)


@pytest.mark.parametrize("kind", ("transposed", "broadcast", "sliced", "column", "1-d"))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("tile", (256, 1024))
def test_two_dim_walk_matches_reference_on_ragged_tiles(
    triton_backend: str, kind: str, dtype: torch.dtype, tile: int
) -> None:
    device = backends.info(triton_backend).device_type
    g, x, t = _views(kind, dtype, device)
    out = torch.full(g.shape, float("nan"), dtype=dtype, device=device)  # every element must be written
    _, ex = kernels.aclnn.mse_loss_backward_get_workspace_size(g, x, t, 0, out, backend=triton_backend)
    assert ex.config.variant is Variant.STRIDED and len(ex.geometry.shape) == (1 if kind == "1-d" else 2), ex.geometry
    cores = 3  # a persistent grid of fewer programs than tiles: each program strides over several
    config = Tiling(tile=tile, cores=cores, variant=Variant.STRIDED, num_warps=4)
    kernels.mse_loss_backward(g, x, t, "none", out=out, backend=triton_backend, config=config)
    assert_within(out, kernels.ops.mse.reference(g, x, t, "none"), ulps_for(dtype))


def _kahan(acc: np.ndarray, comp: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The kernel's Kahan step for finite sums (its zeroed compensation past inf is not modelled)."""
    y = v - comp
    tot = acc + y
    return tot, (tot - acc) - y


def _kahan_lanes(terms: np.ndarray, lanes: int) -> np.ndarray:
    """The reduce walk's float32 sums of ``terms`` (summed index first, then outputs): lane k takes
    terms k, k + lanes, ... in ascending order, Kahan-summed; then, from lane 0's sum and its
    compensation, each next lane's compensation is added to the running one and its sum Kahan-added."""
    states = []
    for k in range(lanes):
        acc = comp = np.zeros(terms.shape[1], np.float32)
        for v in terms[k::lanes]:
            acc, comp = _kahan(acc, comp, v)
        states.append((acc, comp))
    tot, tcomp = states[0]
    for acc, comp in states[1:]:
        tot, tcomp = _kahan(tot, tcomp + comp, acc)
    return tot


def test_reduce_lanes_come_from_the_sum_length_alone(triton_backend: str) -> None:
    from kernels.backends import triton_loops

    got = {n: triton_loops.reduce_lanes(n) for n in (1, 7, 15, 16, 31, 32, 37, 63, 64, 403, 1 << 20)}
    assert got == {1: 1, 7: 1, 15: 1, 16: 1, 31: 1, 32: 2, 37: 2, 63: 2, 64: 4, 403: 4, 1 << 20: 4}


# input, target (= grad) shapes: 7 terms (two groups of four, the last with one dead slot); 3 x 4
# over two summed dims; 64 terms over 4 lanes (four groups of four each, as the benchmark's summed
# case); 37 over 2 lanes (lane 0 sums 19 terms, lane 1 18: the fifth group runs past the sum's end
# in both); 5 x 13 over two summed dims and 4 lanes (lane 0 sums 17 terms, the others 16)
SUMS = {
    "seven": ((1, 64), (7, 64)),
    "two-dims": ((64, 1), (3, 64, 4)),
    "four-lanes": ((1, 40), (64, 40)),
    "two-lanes": ((1, 64), (37, 64)),
    "two-dims-four-lanes": ((8, 1), (5, 8, 13)),
}


@pytest.mark.parametrize("sums", SUMS)
@pytest.mark.parametrize("tile", (256, 1024))
def test_reduce_walk_sums_each_output_over_its_lanes_in_kahan_order_to_the_bit(
    triton_backend: str, sums: str, tile: int
) -> None:
    from kernels.backends import triton_loops

    device = backends.info(triton_backend).device_type
    x_shape, t_shape = SUMS[sums]
    gen = torch.Generator().manual_seed(5)
    # magnitudes 2^-20..2^20, so that a plain float32 sum and a Kahan sum disagree on most outputs
    scale = torch.pow(2.0, torch.randint(-20, 21, t_shape, generator=gen).double())
    t = (torch.rand(t_shape, generator=gen, dtype=torch.float64) * scale).float()
    g = torch.randn(t_shape, generator=gen)
    x = torch.zeros(x_shape)
    out = torch.full(x_shape, float("nan"), device=device)
    config = Tiling(tile=tile, cores=2, variant=Variant.REDUCE, num_warps=4)
    args = (g.to(device), x.to(device), t.to(device))
    _, ex = kernels.aclnn.kl_div_backward_get_workspace_size(*args, "sum", False, out, backend=triton_backend)
    assert ex.config.variant is Variant.REDUCE and len(ex.geometry.rshape) == len(t_shape) - 1
    kernels.kl_div_backward(*args, "sum", log_target=False, out=out, backend=triton_backend, config=config)
    # KL's term in float32 as the kernel has it, (-t * g) * 1, laid out (terms in B's row-major order, outputs)
    terms = (-t.numpy() * g.numpy()).astype(np.float32)
    if len(t_shape) == 3:  # (i, k) in ascending order for each output j
        terms = terms.transpose(0, 2, 1).reshape(-1, t_shape[1])
    else:
        terms = terms.reshape(t_shape[0], -1)
    lanes = triton_loops.reduce_lanes(terms.shape[0])
    assert lanes == {"four-lanes": 4, "two-lanes": 2, "two-dims-four-lanes": 4}.get(sums, 1)
    expected = _kahan_lanes(terms, lanes)
    if lanes > 1:  # the split shows in the bits: one lane's ascending sum would differ
        assert (expected != _kahan_lanes(terms, 1)).sum() > 3
    plain = np.zeros(terms.shape[1], np.float32)
    for v in terms:
        plain = plain + v
    assert (expected != plain).sum() > 3  # the compensation is visible in the bits
    got = out.cpu().reshape(-1).numpy()
    assert np.array_equal(got.view(np.int32), expected.view(np.int32)), (got, expected)
