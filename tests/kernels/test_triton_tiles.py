"""The Triton backends' 2-d tile walk (triton_loops._loss_bwd_strided2d_kernel): every strided call
of one or two coalesced dims goes through it on CUDA and under the interpreter, tiles ragged on both
dims, and the tile split (BM x BN) follows the inner dim."""

from __future__ import annotations

import pytest
import torch

import kernels
from kernels import backends
from kernels.modes import Variant
from kernels.tiling import Tiling
from tests.helpers import DTYPES, assert_within, ulps_for


@pytest.fixture(params=("triton-interpret", "cuda"))
def triton_backend(request: pytest.FixtureRequest) -> str:
    # Loading the backend first: triton_loops imports triton, which must see TRITON_INTERPRET first.
    ok, why = backends.probe(request.param)
    if not ok:
        pytest.skip(why)
    return request.param


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
    if kind == "sliced":  # every second column: strides (2000, 2), no unit stride in x
        return rand(3, 1000), rand(3, 2000)[:, ::2], rand(3, 1000)
    return rand(999), rand(2997)[::3], rand(999)  # "1-d": one strided dim, walked as (1, 999)


@pytest.mark.parametrize("kind", ("transposed", "broadcast", "sliced", "1-d"))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("tile", (256, 1024))
def test_two_dim_walk_matches_reference_on_ragged_tiles(
    triton_backend: str, kind: str, dtype: torch.dtype, tile: int
) -> None:
    device = backends.info(triton_backend).device_type
    g, x, t = _views(kind, dtype, device)
    out = torch.full(g.shape, float("nan"), dtype=dtype, device=device)  # every element must be written
    _, ex = kernels.aclnn.mse_loss_backward_get_workspace_size(g, x, t, 0, out, backend=triton_backend)
    assert ex.config.variant is Variant.STRIDED and len(ex.geometry.shape) <= 2, ex.geometry
    cores = 3  # a persistent grid of fewer programs than tiles: each program strides over several
    config = Tiling(tile=tile, cores=cores, variant=Variant.STRIDED, num_warps=4)
    kernels.mse_loss_backward(g, x, t, "none", out=out, backend=triton_backend, config=config)
    assert_within(out, kernels.ops.mse.reference(g, x, t, "none"), ulps_for(dtype))
