"""The CPU backend's streamed stores (``Tiling.stream``): out through an L1 buffer, whole lines
stored non-temporally, the ragged ends element by element.

Streaming changes where the bits go, never which: every streamed config gives what the ordinary
store gives, for both contiguous loops, every op and dtype, sizes with tails shorter than a line,
a tile and a block, both core counts, and an out that starts off a line boundary (the lines then
begin mid-tile). Nothing around out is written. The non-temporal store is checked where it acts:
in the machine code numba built.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kernels
from kernels import backends
from kernels.backends import cpu_loops
from kernels.modes import Variant
from kernels.ops import mse
from kernels.tiling import CPU_STREAM_TILE_MAX, CPU_TILES, Tiling, cpu_space
from tests.helpers import CALLS, as_bits, every_loop_case

pytestmark = pytest.mark.usefixtures("cpu_backend")


@every_loop_case
def test_streamed_stores_give_the_same_bits_and_touch_nothing_else(
    op: str, dtype: torch.dtype, n: int, reduction: str
) -> None:
    gen = torch.Generator().manual_seed(n)
    x, t = torch.randn(n, generator=gen).to(dtype), torch.randn(n, generator=gen).to(dtype)
    g = torch.randn(n, generator=gen).to(dtype) if reduction == "none" else torch.tensor(0.75).to(dtype)
    variant = Variant.FLAT if reduction == "none" or n == 1 else Variant.SCALAR_GRAD
    want = as_bits(CALLS[op](g, x, t, reduction, backend="cpu", config=Tiling(256, 1, variant)))
    for lead in (0, 1, 7):  # out at a line boundary (torch aligns to 64 B), one and seven elements past it
        storage = torch.full((n + lead + 3,), 5.0).to(dtype)
        out = storage[lead : lead + n]
        for cores in range(1, min(2, cpu_loops.max_threads()) + 1):
            for tile in (256, CPU_STREAM_TILE_MAX):
                config = Tiling(tile, cores, variant, prefetch=1, stream=True)
                got = CALLS[op](g, x, t, reduction, backend="cpu", config=config, out=out)
                assert got.data_ptr() == out.data_ptr()
                assert torch.equal(as_bits(out), want), f"lead={lead} cores={cores} tile={tile}"
                # The elements before and after out keep their sentinel: no whole line spilled over.
                assert torch.equal(storage[:lead], torch.full((lead,), 5.0).to(dtype))
                assert torch.equal(storage[lead + n :], torch.full((3,), 5.0).to(dtype))
                out.zero_()


def test_stream_is_a_knob_of_the_contiguous_variants_with_an_l1_tile() -> None:
    space = cpu_space(backends.get("cpu").facts(), (Variant.FLAT, Variant.STRIDED), 1 << 20)
    streamed = [c for c in space if c.stream]
    assert {c.variant for c in streamed} == {Variant.FLAT}
    assert {c.tile for c in streamed} == {t for t in CPU_TILES if t <= CPU_STREAM_TILE_MAX}
    assert not space.default.stream  # the untuned baseline stores as PyTorch does
    for bad in (Tiling(4096, 1, Variant.STRIDED, stream=True), Tiling(65536, 1, Variant.FLAT, stream=True)):
        assert "stream_buffered" in " ".join(space.violations(bad))
    with pytest.raises(kernels.AclnnError, match="stream_buffered"):
        x = torch.randn(1 << 16)
        kernels.mse_loss_backward(x, x, x, "none", backend="cpu", config=Tiling(65536, 1, Variant.FLAT, stream=True))


def test_the_streamed_store_is_non_temporal_in_the_machine_code() -> None:
    loops = cpu_loops.make_cpu_kernels(mse.FORMULA.value)
    for dtype, tag in ((np.float32, np.empty(0, np.float32)), (np.int16, np.empty(0, np.int16))):
        a = np.zeros(4096, dtype)
        p = a.ctypes.data
        loops.flat[0](p, p, p, p, tag, tag, tag, tag, 4096, 1.0, 1024, 0, 1, True)
    asm = "\n".join(loops.flat[0].inspect_asm().values())
    assert "vmovnt" in asm and "sfence" in asm
