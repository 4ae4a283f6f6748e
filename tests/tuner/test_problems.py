"""tuner.problems.Case: its inputs, filled and unfilled, laid out the same way."""

from __future__ import annotations

import pytest
import torch

from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout


@pytest.mark.parametrize("layout", list(InputLayout))
@pytest.mark.parametrize("reduction", [Reduction.NONE, Reduction.MEAN])
def test_unfilled_inputs_have_the_filled_ones_shapes_strides_and_dtype(
    layout: InputLayout, reduction: Reduction
) -> None:
    """A lookup reads shapes and strides only: ``fill=False`` must lay tensors out exactly as the
    seeded ones, or its config would be another problem's."""
    case = Case(Op.KL_DIV, torch.bfloat16, (1 << 12,), reduction, layout=layout)
    for filled, empty in zip(case.inputs("cpu"), case.inputs("cpu", fill=False), strict=True):
        assert (empty.shape, empty.stride(), empty.dtype) == (filled.shape, filled.stride(), filled.dtype)


def test_filled_inputs_are_seeded_in_the_order_gradient_input_target() -> None:
    """Every committed result was measured on these values: the draws keep their order (a swap
    would hand a study other inputs under the same seed)."""
    case = Case(Op.KL_DIV, torch.float32, (4096,), Reduction.NONE)
    first, again, other = case.inputs("cpu"), case.inputs("cpu"), case.inputs("cpu", seed=1)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[1], other[1])
    gen = torch.Generator().manual_seed(0)
    g = torch.randn(4096, generator=gen) * 1.5 + 0.25
    x, t = torch.randn(4096, generator=gen), torch.rand(4096, generator=gen)  # KL's target: probabilities
    assert all(torch.equal(a, b) for a, b in zip(first, (g, x, t), strict=True))
