"""KL log_target's narrow formula (Formula.narrow_value): the degree-3 exp the CPU backend runs for
float16/bfloat16 outputs of elementwise walks, and the degree-7 one it keeps everywhere else.

The narrow exp is held to the 16-bit bar on every float16 and bfloat16 target there is (65536 bit
patterns each, NaN and inf and subnormals included), through the library on the CPU backend, in
each elementwise variant. Broadcast sums must keep the float32 formula: a sum that cancels would
show the short polynomial's 1e-4 relative error against SEMANTICS' 1e-5 bar.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import kernels
from kernels.backends import cpu
from kernels.ops import kl_div
from tests.helpers import assert_within

SIXTEEN = (torch.float16, torch.bfloat16)


def _every_value(dtype: torch.dtype) -> torch.Tensor:
    """All 65536 bit patterns of a 16-bit float dtype."""
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def test_narrow_polynomial_error_bound_in_float64() -> None:
    """The coefficients as shipped (float32) against exp over the reduced range and a little past it
    (k's rounding lets r overshoot ln2/2 by an ulp): under a quarter of float16's smallest relative
    half ulp, 2^-12, so one rounding into 16 bits stays within 1 ulp."""
    r = np.linspace(-0.35, 0.35, 400_001)
    c = [2.0 * float(v) for v in kl_div._SHORT]  # shipped halved (exactly): the exp is twice them
    p = ((c[3] * r + c[2]) * r + c[1]) * r + c[0]
    worst = float(np.max(np.abs(p / np.exp(r) - 1.0)))
    assert worst < 2.0**-13 and worst > 0.0, worst


@pytest.mark.parametrize("dtype", SIXTEEN, ids=str)
@pytest.mark.parametrize("config", ["flat", "scalar_grad"])
def test_narrow_exp_within_one_ulp_on_every_16_bit_target(dtype: torch.dtype, config: str) -> None:
    t = _every_value(dtype)
    # g = -1: out = exp(t) itself, so the exp alone is measured, over its whole 16-bit range.
    g = torch.full((), -1.0, dtype=dtype) if config == "scalar_grad" else torch.full_like(t, -1.0)
    cfg = {"variant": config, "tile": 1024, "cores": 1}
    out = kernels.kl_div_backward(g, t, t, "sum", True, backend="cpu", config=cfg)
    assert_within(out, kl_div.reference(g, t, t, "sum", True), 1.0)


@pytest.mark.parametrize("dtype", SIXTEEN, ids=str)
def test_narrow_exp_within_one_ulp_in_the_strided_walk(dtype: torch.dtype) -> None:
    """Every 16-bit target again, as a transposed view: the strided and transposed walks of the
    elementwise layout run the narrow formula too."""
    t = _every_value(dtype).reshape(256, 256).t()
    # |g| in [1, 2), so exp(t) * g overflows float32 only where the exact value overflows the dtype
    # (bfloat16 reaches exp(88.8) = float32's max: its product with g < 1 would be float32's inf).
    gen = torch.Generator().manual_seed(3)
    g = ((torch.rand(256, 256, generator=gen) + 1.0) * torch.randn(256, 256, generator=gen).sign()).to(dtype)
    out = kernels.kl_div_backward(g, t, t, "sum", True, backend="cpu")
    assert_within(out, kl_div.reference(g, t, t, "sum", True), 1.0)


@pytest.mark.parametrize("dtype", SIXTEEN, ids=str)
def test_broadcast_sum_keeps_the_float32_exp_where_terms_cancel(dtype: torch.dtype) -> None:
    """Rows alternate t+ = -0.2470703125 (where the degree-3 exp reads 9.4e-5 high) with g = 1 and
    t- = -1.0390625 (1.0e-4 low) with g = -exp(t+ - t-): the terms cancel, their errors add up. The
    sum meets relative 1e-5 of the summed magnitudes only with the float32 exp (the narrow one is
    off by about 1e-4 of them: this test fails if broadcast sums take Formula.narrow_value)."""
    rows, cols = 4096, 8
    plus, minus = -0.2470703125, -1.0390625
    t = torch.tensor([plus, minus], dtype=torch.float64).repeat(rows // 2)[:, None].repeat(1, cols).to(dtype)
    g = torch.tensor([1.0, -math.exp(plus - minus)], dtype=torch.float64).repeat(rows // 2)[:, None]
    g = g.repeat(1, cols).to(dtype)
    x = torch.zeros(1, cols, dtype=dtype)  # B = (rows, cols) is summed back to input's (1, cols)
    out = kernels.kl_div_backward(g, x, t, "sum", True, backend="cpu")
    ref = kl_div.reference(g, x, t, "sum", True)
    scale = (t.double().exp() * g.double()).abs().sum(0, keepdim=True)
    assert float((ref.abs() / scale).max()) < 0.01  # the case is one that cancels
    assert_within(out, ref, 1.0, rel_to=scale, rel=1e-5)


def test_only_formulas_with_a_narrow_value_get_narrow_kernels_plumbing() -> None:
    """Which compiled loops the backend hands out (plumbing; the tests above check the values)."""
    backend = cpu.BACKEND
    assert backend.kernels(kl_div.FORMULA_LOG, True) is not backend.kernels(kl_div.FORMULA_LOG, False)
    assert backend.kernels(kl_div.FORMULA, True) is backend.kernels(kl_div.FORMULA, False)
