"""The strided walk's dim order: the innermost dim is the one most operand bytes step through at
unit stride (a transposed input with a contiguous output walks the input, not the output)."""

from __future__ import annotations

import torch

import kernels
from kernels.modes import Layout, Variant
from kernels.plan import elementwise_geometry, reorder


def test_transposed_inputs_walk_their_own_rows() -> None:
    shape, strides = reorder((64, 4096), [(1, 64), (1, 64), (1, 64), (4096, 1)], [4, 4, 4, 4])
    assert shape == (4096, 64) and strides[1] == (64, 1) and strides[3] == (1, 4096)


def test_contiguous_and_broadcast_operands_keep_the_output_order() -> None:
    dense = [(4096, 1)] * 4
    assert reorder((64, 4096), dense, [4] * 4) == ((64, 4096), dense)
    bcast = [(0, 0), (4096, 1), (0, 1), (4096, 1)]  # 0-d grad, a row of target broadcast
    assert reorder((64, 4096), bcast, [4] * 4) == ((64, 4096), bcast)


def test_wider_operands_outvote_narrower_ones() -> None:
    # One float32 output (4 bytes) prefers dim 1, one bfloat16 input (2 bytes) prefers dim 0.
    shape, _ = reorder((8, 16), [(0, 0), (1, 8), (0, 0), (16, 1)], [2, 2, 2, 4])
    assert shape == (8, 16)


def test_reordered_walk_computes_the_same_values() -> None:
    x = torch.randn(300, 64).t()
    t = torch.randn(300, 64).t()
    g = torch.randn(64, 300)
    out = kernels.mse_loss_backward(g, x, t, "none", backend="cpu")
    want = 2 * (x.double() - t.double()) * g.double()
    assert torch.allclose(out.double(), want, rtol=1e-6, atol=1e-6)


def test_transposed_inputs_with_a_contiguous_out_are_their_own_layout() -> None:
    """Layout.TRANSPOSED: the 2-d walk whose out is unit-strided on the outer dim once reorder puts
    the inputs' unit stride inside; a broadcast row, a transposed out or a 3-d transpose stay
    STRIDED (the generic walk)."""
    t = torch.randn(300, 64).t()
    dense = torch.randn(64, 300)
    cases = {
        "transposed inputs": ((t, t, t, torch.empty(64, 300)), Layout.TRANSPOSED),
        # A dense gradient votes with out for out's order (8 bytes a side): the generic walk.
        "dense grad": ((dense, t, t, torch.empty(64, 300)), Layout.STRIDED),
        "0-d grad": ((torch.tensor(1.0), t, t, torch.empty(64, 300)), Layout.TRANSPOSED),
        "broadcast row": ((dense, dense, dense[:1].expand(64, 300), torch.empty(64, 300)), Layout.STRIDED),
        "transposed out too": ((t, t, t, torch.empty(300, 64).t()), Layout.STRIDED),
        "3-d": (
            (torch.tensor(1.0), *(torch.randn(5, 300, 64).transpose(1, 2),) * 2, torch.empty(5, 64, 300)),
            Layout.STRIDED,
        ),
    }
    for name, ((g, x, tg, out), want) in cases.items():
        geo = elementwise_geometry(g, x, tg, out, tuple(out.shape))
        assert geo.layout is want, name
        assert geo.variants == (Variant.STRIDED,), name
