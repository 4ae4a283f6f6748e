"""Every op against its float64 reference, to the accuracy of SEMANTICS.md, on cpu and triton-interpret.

The grid, and why each axis is there:
- op and mode: mse, l1, kl_div with log_target both ways: four formulas, four kernels' value paths.
- reduction: every legal one, because each changes cof (and batchmean divides by B[0]).
- dtype: float32, float16, bfloat16, because 16-bit goes through in-kernel conversion and one rounding.
- case: each one reaches a different layout/variant or an edge of the contract (see CASES).
The gradient is random and not 1, so a kernel that ignores it cannot pass.
"""

from __future__ import annotations

import math

import pytest
import torch

import kernels
from kernels.ops import kl_div, l1, mse
from tests.helpers import assert_within, ulps_for

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# name -> (grad shape, input shape, target shape); each reason is why the case exists.
CASES: dict[str, tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {
    "zero_d": ((), (), ()),  # 0-d tensors are legal; the flat path with n = 1
    "odd": ((41, 401, 31), (41, 401, 31), (41, 401, 31)),  # odd sizes: no tile or block divides them
    "scalar_grad": ((), (37, 129), (37, 129)),  # autograd's 0-d gradient for mean/sum: scalar_grad variant
    "target_bcast": ((7, 33, 5), (7, 33, 5), (33, 1)),  # target smaller than the output: strided
    "input_small": ((6, 17, 9), (17, 1), (6, 17, 9)),  # MSE/L1: input smaller than out; KL: sum back to input
    "grad_bcast": ((1, 9), (5, 8, 9), (5, 8, 9)),  # gradient broadcast along leading dims
    "scalar_grad_bcast": ((), (5, 33), (33,)),  # 0-d gradient in a strided walk: its unit-stride, read-once path
    "empty": ((0, 5), (0, 5), (0, 5)),  # nothing to do: success, no launch
}


def _inputs(case: str, dtype: torch.dtype, device: str, seed: int = 0) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(seed)
    gs, xs, ts = CASES[case]
    g = torch.randn(gs, generator=gen, dtype=torch.float64) * 3.0 - 0.5
    x = torch.randn(xs, generator=gen, dtype=torch.float64)
    t = torch.randn(ts, generator=gen, dtype=torch.float64)
    return tuple(v.to(dtype).to(device) for v in (g, x, t))


def _check_kl(out: torch.Tensor, g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, red: str, log: bool) -> None:
    ref = kl_div.reference(g, x, t, red, log)
    space = torch.broadcast_shapes(x.shape, t.shape)
    if tuple(space) != tuple(x.shape):  # a broadcast sum: relative 1e-5 of the summed magnitudes
        terms = (-(t.double().cpu().exp() if log else t.double().cpu()) * g.double().cpu()).abs()
        scale = terms.expand(space).sum_to_size(x.shape) * kl_div.cof(
            kernels.Reduction.parse(red, allow_batchmean=True), tuple(space)
        )
        assert_within(out, ref, 0.0 if out.dtype == torch.float32 else 1.0, rel_to=scale, rel=1e-5)
    else:
        assert_within(out, ref, ulps_for(out.dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_mse_matches_reference(backend: str, device: str, case: str, dtype: torch.dtype, reduction: str) -> None:
    g, x, t = _inputs(case, dtype, device)
    out = kernels.mse_loss_backward(g, x, t, reduction, backend=backend)
    assert out.shape == torch.broadcast_shapes(g.shape, x.shape, t.shape) and out.dtype == dtype
    assert_within(out, mse.reference(g, x, t, reduction), ulps_for(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_l1_matches_reference(backend: str, device: str, case: str, dtype: torch.dtype, reduction: str) -> None:
    g, x, t = _inputs(case, dtype, device)
    out = kernels.l1_loss_backward(g, x, t, reduction, backend=backend)
    assert_within(out, l1.reference(g, x, t, reduction), ulps_for(dtype))


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum", "batchmean"])
def test_kl_div_matches_reference(
    backend: str, device: str, case: str, dtype: torch.dtype, reduction: str, log_target: bool
) -> None:
    if case == "zero_d" and reduction == "batchmean":
        pytest.skip("batchmean on a 0-d B is an error: test_errors covers it")
    g, x, t = _inputs(case, dtype, device)
    out = kernels.kl_div_backward(g, x, t, reduction, log_target, backend=backend)
    assert out.shape == x.shape and out.dtype == dtype
    _check_kl(out, g, x, t, reduction, log_target)


def test_kl_div_sums_back_over_leading_and_inner_dims(backend: str, device: str) -> None:
    """input (3, 1, 4) against target (2, 3, 5, 4): a missing leading dim and an inner one are summed."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 1, 4, generator=gen).to(device)
    t = torch.rand(2, 3, 5, 4, generator=gen).to(device)
    g = torch.randn(2, 3, 5, 4, generator=gen).to(device)
    out = kernels.kl_div_backward(g, x, t, "mean", backend=backend)
    _check_kl(out, g, x, t, "mean", False)


# input, target shapes: 70 rows summed across outputs (the CPU's reduce walk, four lanes on Triton);
# 2100 terms along a unit-stride run (the CPU's reduce_along walk, REDUCE_ALONG_SUM and up).
INF_SUMS = {"across": ((1, 4), (70, 4)), "along": ((4, 1), (4, 2100))}


@pytest.mark.parametrize("log", [False, True], ids=["plain", "log"])
@pytest.mark.parametrize("sums", INF_SUMS)
def test_kl_div_sums_keep_infinite_terms_infinite(backend: str, device: str, sums: str, log: bool) -> None:
    """A sum holding one infinite term is that infinity, wherever the term falls; +inf and -inf
    together are NaN (a Kahan step once made every later step NaN: inf - inf in the compensation)."""
    x_shape, t_shape = INF_SUMS[sums]
    gen = torch.Generator().manual_seed(6)
    t = torch.rand(t_shape, generator=gen) - 0.5
    g = torch.randn(t_shape, generator=gen)
    inf = math.inf
    end = t_shape[0 if sums == "across" else 1] - 1  # the summed dim's last index
    # (output, term, value): the first term, a middle one, the last; output 2's +inf and -inf: NaN
    for out_at, term, value in ((0, 0, inf), (1, 33, -inf), (2, 2, inf), (2, 50, -inf), (3, end, -inf)):
        at = (term, out_at) if sums == "across" else (out_at, term)
        t[at] = value
        g[at] = 1.0
    if log:  # exp(+inf) = inf; exp(-inf) = 0 is finite: make those terms +inf too
        t = torch.where(t == -inf, inf, t)
    x = torch.zeros(x_shape)
    out = kernels.kl_div_backward(g.to(device), x.to(device), t.to(device), "sum", log, backend=backend)
    ref = kl_div.reference(g, x, t, "sum", log)
    assert torch.isinf(ref).sum() >= 3 and torch.isnan(ref).sum() == (0 if log else 1)
    _check_kl(out.cpu(), g, x, t, "sum", log)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_non_contiguous_inputs_and_out(backend: str, device: str, dtype: torch.dtype) -> None:
    """Transposes, stepped slices and expanded stride-0 views give the values of contiguous copies."""
    gen = torch.Generator().manual_seed(2)
    base = torch.randn(3, 40, 30, generator=gen).to(dtype).to(device)
    g = base[0].t()  # transpose (30, 40)
    x = base[1, :, ::1].t().contiguous()[:, :]  # contiguous, for contrast
    t = torch.randn(60, 80, generator=gen).to(dtype).to(device)[::2, ::2]  # stepped slice (30, 40)
    expanded = torch.randn(1, 40, generator=gen).to(dtype).to(device).expand(30, 40)  # stride 0
    holder = torch.full((40, 30), 7.0, dtype=dtype, device=device)
    for op, ref in ((kernels.mse_loss_backward, mse.reference), (kernels.l1_loss_backward, l1.reference)):
        out = holder.t()  # a transposed out
        op(g, x, t, "sum", out=out, backend=backend)
        assert_within(out, ref(g, x, t, "sum"), ulps_for(dtype))
        dense = op(g.contiguous(), x, t.contiguous(), "sum", backend=backend)
        assert torch.equal(out, dense)
        strided = op(g, expanded, t, "none", backend=backend)
        assert torch.equal(strided, op(g.contiguous(), expanded.contiguous(), t.contiguous(), "none", backend=backend))
    out = holder.t()
    kernels.kl_div_backward(g, expanded, t, "mean", True, out=out, backend=backend)
    _check_kl(out, g, expanded, t, "mean", True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_and_inf_propagate_as_the_formula_says(backend: str, device: str, dtype: torch.dtype) -> None:
    special = [math.nan, math.inf, -math.inf, 0.0, 1.0, -2.0]
    vals = torch.tensor([(a, b, c) for a in special for b in special for c in special], dtype=torch.float64)
    g, x, t = (vals[:, i].to(dtype).to(device) for i in range(3))
    assert_within(
        kernels.mse_loss_backward(g, x, t, "none", backend=backend), mse.reference(g, x, t, "none"), ulps_for(dtype)
    )
    assert_within(
        kernels.l1_loss_backward(g, x, t, "none", backend=backend), l1.reference(g, x, t, "none"), ulps_for(dtype)
    )
    for log in (False, True):
        out = kernels.kl_div_backward(g, x, t, "sum", log, backend=backend)
        assert_within(out, kl_div.reference(g, x, t, "sum", log), ulps_for(dtype))


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter's numpy, on the meant infs
def test_kl_log_target_exp_holds_over_the_whole_float32_range(backend: str, device: str) -> None:
    """exp(target) from underflow to overflow, subnormal results and the edges included: the kernels
    compute exp themselves (Cody-Waite and a polynomial, not libm), so all of its range is checked."""
    edges = [-math.inf, math.inf, math.nan, -0.0, 0.0, 88.72283, 88.72284, -87.33654, -103.97208, -104.0, 200.0]
    t = torch.cat([torch.linspace(-110.0, 95.0, 200_001, dtype=torch.float64), torch.tensor(edges)]).float()
    g = torch.full_like(t, -1.0)  # out = exp(t) * 1: the exp alone is measured
    out = kernels.kl_div_backward(g.to(device), t.to(device), t.to(device), "sum", True, backend=backend)
    assert_within(out, kl_div.reference(g, t, t, "sum", True), ulps_for(torch.float32))


# Gradients from float32's smallest normal to its largest, both signs, and zero: exp(t) * g * cof is
# finite far outside the t where exp(t) alone is (88.72 down to -103.97 in float32).
_PRODUCT_G = [0.0, -0.0, 1e-37, -3e-30, 1e-20, -1e-10, 0.37, -1.0, 3e10, -1e20, 2e30, -3.4e38]


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter's numpy, on the meant infs
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)  # bfloat16: float32's range
@pytest.mark.parametrize("reduction", ["sum", "mean"])  # cof = 1, and 1 / numel, far from 1
def test_kl_log_target_product_holds_where_exp_alone_overflows_or_underflows(
    backend: str, device: str, dtype: torch.dtype, reduction: str
) -> None:
    """SEMANTICS' reference is the formula in float64, where exp(100) * 0 is 0 and exp(100) * 1e-30
    is 2.7e13: every t from where every product is 0 to where every nonzero one is inf, against
    every g, through the full- and the 0-d-gradient loops (and 16-bit's narrow and table paths)."""
    t = torch.cat([torch.linspace(-200.0, 250.0, 4501, dtype=torch.float64), torch.tensor([-math.inf, math.inf])])
    gs = torch.tensor(_PRODUCT_G, dtype=torch.float64)
    grid_t, grid_g = (v.reshape(-1).to(dtype) for v in torch.meshgrid(t, gs, indexing="ij"))
    out = kernels.kl_div_backward(
        grid_g.to(device), grid_t.to(device), grid_t.to(device), reduction, True, backend=backend
    )
    assert_within(out, kl_div.reference(grid_g, grid_t, grid_t, reduction, True), ulps_for(dtype))
    tt = t.to(dtype)
    for g in gs.to(dtype):
        out = kernels.kl_div_backward(g.to(device), tt.to(device), tt.to(device), reduction, True, backend=backend)
        assert_within(out, kl_div.reference(g, tt, tt, reduction, True), ulps_for(dtype))


def test_kl_log_target_infinite_gradient_meets_float64_exp_underflow(backend: str, device: str) -> None:
    """g = +-inf: out is +-inf wherever float64's exp(t) is positive, and 0 * inf = NaN from where it
    underflows to 0 (the float32 t = -745.13324, -inf included), exactly as the reference."""
    t = torch.tensor([-math.inf, -800.0, -745.13324, -745.1332, -700.0, -200.0, -120.0, 0.0, 100.0, math.inf])
    for g in (math.inf, -math.inf):
        gs = torch.full_like(t, g)
        out = kernels.kl_div_backward(gs.to(device), t.to(device), t.to(device), "mean", True, backend=backend)
        ref = kl_div.reference(gs, t, t, "mean", True)
        assert torch.isnan(ref[:3]).all() and torch.isinf(ref[3:]).all()
        assert_within(out, ref, ulps_for(torch.float32))


def test_kl_log_target_zero_gradient_past_float64_exp_overflow_is_exact_zero(backend: str, device: str) -> None:
    """A documented departure from the float64 reference: for t between 709.78 (where float64's exp
    overflows, so the reference is inf * 0 = NaN) and about 1.6e6 (where the kernels' polynomial
    overflows), out is exp(t) * 0 = -0, the formula's exact value. t = inf still gives NaN."""
    t = torch.tensor([710.0, 1000.0, 1e5, math.inf], device=device)
    out = kernels.kl_div_backward(torch.zeros(4, device=device), t, t, "sum", True, backend=backend).cpu()
    assert out[:3].tolist() == [0.0, 0.0, 0.0] and math.isnan(out[3].item())
    assert torch.isnan(kl_div.reference(torch.zeros(4), t.cpu(), t.cpu(), "sum", True)).all()


def test_l1_sign_of_nan_is_zero(backend: str, device: str) -> None:
    x = torch.tensor([math.nan, 1.0, 2.0, 2.0], device=device)
    t = torch.tensor([0.0, math.nan, 2.0, 1.0], device=device)
    out = kernels.l1_loss_backward(torch.ones(4, device=device), x, t, "none", backend=backend)
    assert out.cpu().tolist() == [0.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("out_dtype", DTYPES, ids=str)
def test_mse_casts_into_any_float_out(backend: str, device: str, out_dtype: torch.dtype) -> None:
    g, x, t = _inputs("target_bcast", torch.float16, device)
    out = torch.empty(torch.broadcast_shapes(g.shape, x.shape, t.shape), dtype=out_dtype, device=device)
    kernels.mse_loss_backward(g, x, t, "mean", out=out, backend=backend)
    assert_within(out, mse.reference(g, x, t, "mean"), ulps_for(out_dtype))


def test_l1_promotes_mixed_dtypes(backend: str, device: str) -> None:
    g = torch.randn(8, 9).to(torch.float16).to(device)
    x = torch.randn(8, 9).to(torch.bfloat16).to(device)
    t = torch.randn(9).to(device)
    out = kernels.l1_loss_backward(g, x, t, "mean", backend=backend)
    assert out.dtype == torch.float32
    assert_within(out, l1.reference(g, x, t, "mean"), 4.0)


def test_empty_launches_nothing_and_leaves_out(backend: str, device: str) -> None:
    out = torch.full((0, 3), 5.0, device=device)
    _, ex = kernels.aclnn.mse_loss_backward_get_workspace_size(
        torch.ones(0, 3, device=device),
        torch.ones(0, 3, device=device),
        torch.ones(1, 3, device=device),
        1,
        out,
        backend=backend,
    )
    assert ex.empty
    kernels.aclnn.mse_loss_backward(None, 0, ex)
    kl_out = torch.full((2, 1), 5.0, device=device)  # B = (2, 0): empty, out untouched
    empty, one = torch.ones(2, 0, device=device), torch.ones(2, 1, device=device)
    kernels.kl_div_backward(empty, one, empty, "sum", out=kl_out, backend=backend)
    assert kl_out.cpu().tolist() == [[5.0], [5.0]]
