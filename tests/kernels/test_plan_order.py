"""The strided walk's dim order: the innermost dim is the one most operand bytes step through at
unit stride (a transposed input with a contiguous output walks the input, not the output)."""

from __future__ import annotations

import torch

import kernels
from kernels.plan import reorder


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
