"""The CPU backend's transposed walk (cpu_loops.transposed): 2-d problems whose inputs are
transposed views and whose out is contiguous go through 64 x 64 tiles, 8 x 8 register transposes
inside them and element-wise copies at ragged edges. Every shape class below must give bitwise
what the same call on contiguous copies gives (the formula is elementwise, so the layout may not
change a bit), for every dtype, gradient kind and core count."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from numba import njit

import kernels
from kernels import backends
from kernels.backends import cpu_loops
from kernels.modes import Variant
from kernels.tiling import Tiling

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# (rows, cols) of out: tile multiples, ragged in either dim, narrower than one 8 x 8 block.
SHAPES = ((128, 64), (130, 77), (64, 200), (5, 300), (300, 3), (9, 9))
CALLS = {
    "mse": lambda g, x, t, **kw: kernels.mse_loss_backward(g, x, t, "none", **kw),
    "l1": lambda g, x, t, **kw: kernels.l1_loss_backward(g, x, t, "none", **kw),
    "kl_div": lambda g, x, t, **kw: kernels.kl_div_backward(g, x, t, "none", False, **kw),
    "kl_div-log": lambda g, x, t, **kw: kernels.kl_div_backward(g, x, t, "none", True, **kw),
}


@pytest.fixture(autouse=True)
def _cpu() -> None:
    ok, why = backends.probe("cpu")
    if not ok:
        pytest.skip(why)


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


@pytest.mark.parametrize("dtype", [np.float32, np.int16, np.uint16], ids=str)
def test_register_transpose_moves_one_block(dtype: type) -> None:
    """16 columns of _block_rows rows (16 float32, 32 16-bit: one cache line per column)."""

    @njit
    def move(src, s0, ss, dst, d0, ds):
        cpu_loops._transpose_block(src, s0, ss, dst, d0, ds)

    rows, cols = cpu_loops._block_rows(np.dtype(dtype).itemsize), cpu_loops._BLOCK
    src = (np.arange(40 * 40) * 3 + 1).astype(dtype)
    dst = np.zeros(40 * 40, dtype)
    move(src, np.uint64(5), np.uint64(40), dst, np.uint64(7), np.uint64(41))
    want = np.zeros_like(dst)
    for i in range(rows):
        for j in range(cols):
            want[7 + j * 41 + i] = src[5 + i * 40 + j]
    assert np.array_equal(dst, want)  # the rest of dst untouched too
