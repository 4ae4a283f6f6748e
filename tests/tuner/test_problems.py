"""tuner.problems.Case: its inputs, filled and unfilled, laid out the same way."""

from __future__ import annotations

import re

import pytest
import torch

from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout, parse_shape


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


@pytest.mark.parametrize("layout", [InputLayout.CONTIGUOUS, InputLayout.BROADCAST, InputLayout.TRANSPOSED])
@pytest.mark.parametrize("reduction", [Reduction.NONE, Reduction.MEAN, Reduction.SUM])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.filterwarnings("error")  # a resized out warns: it must not happen
def test_mses_baseline_into_out_writes_the_baselines_values_into_that_out(
    layout: InputLayout, reduction: Reduction, dtype: torch.dtype
) -> None:
    """bench --report's "x vendor out": PyTorch's own kernel into a given out must compute what the
    allocating baseline returns, into that very out (no new storage, no resize)."""
    case = Case(Op.MSE, dtype, (1 << 12,), reduction, layout=layout)
    g, x, t = case.inputs("cpu")
    out = case.out_like(x)
    into = case.baseline_into()
    assert into is not None
    got = into(g, x, t, out)
    assert got.data_ptr() == out.data_ptr() and got.shape == out.shape
    assert torch.equal(out, case.baseline()(g, x, t))


@pytest.mark.parametrize("op", [Op.L1, Op.KL_DIV])
def test_l1_and_kl_have_no_baseline_into_out(op: Op) -> None:
    """Their PyTorch backward is a chain of eager ops, each allocating: no one kernel takes an out."""
    assert Case(op, torch.float32, (1 << 12,), Reduction.NONE).baseline_into() is None


@pytest.mark.parametrize(
    ("text", "shape"), [("1048576", (1 << 20,)), ("2^20", (1 << 20,)), ("2^0", (1,)), ("3x4x5", (3, 4, 5)), ("", ())]
)
def test_parse_shape_reads_each_form(text: str, shape: tuple[int, ...]) -> None:
    assert parse_shape(text) == shape


@pytest.mark.parametrize("text", ["-5", "0", "2^-1", "0^3", "4x0", "2^x", "4x-2", "2^2^2", "1.5"])
def test_parse_shape_refuses_what_is_not_sizes_of_1_or_more_by_name(text: str) -> None:
    """A negative or zero size once reached torch (a RuntimeError, or randn's TypeError for 2^-1)."""
    with pytest.raises(ValueError, match=f"^shape: expected .*, got {re.escape(repr(text))}$"):
        parse_shape(text)
