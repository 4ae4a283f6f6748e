"""The Triton backends' device-math paths: KL log_target into 16-bit outs through the device's exp2
(triton_loops._kl_log_narrow, q^3 with q = 2^w clamped to a normal) and bfloat16 outs through a
round-to-nearest cast (RNE, CUDA only: the interpreter's cast truncates). The interpreter's exp2 is
numpy's, exact, so there these tests hold the algorithm (the clamp, the cube's order, the float64
reference's 0 and inf, signs, NaN); on a GPU they hold NVIDIA's ex2.approx too."""

from __future__ import annotations

import math

import pytest
import torch

import kernels
from kernels import backends
from kernels.executor import Executor
from kernels.ops import kl_div
from tests.helpers import assert_within, ulps_for

NARROW = (torch.float16, torch.bfloat16)


def _every(dtype: torch.dtype) -> torch.Tensor:
    """All 65536 values of a 16-bit dtype, and one more element so that mean's cof is 1/65537."""
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    return torch.cat([bits.view(dtype), torch.tensor([1.5], dtype=dtype)])


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the interpreter's numpy, on the meant infs
@pytest.mark.parametrize("dtype", NARROW, ids=str)
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_kl_log_target_16bit_holds_every_target_against_every_gradient_kind(
    triton_backend: str, dtype: torch.dtype, reduction: str
) -> None:
    """Every 16-bit t (inf, NaN, subnormals, the extremes of exp's range) with 0-d gradients from
    the dtype's smallest to its largest and a full gradient of them, to 1 ulp of the out."""
    device = backends.info(triton_backend).device_type
    t = _every(dtype)
    info = torch.finfo(dtype)
    # Not the dtype's max: g = 65504 meets t whose exact product lies within 2^-23 of float16's
    # round-to-inf edge (65520), which no float32 value carrying any rounding error rounds right.
    grads = [1.0, -0.37, 3e-5, -(2.0**-20), 0.75 * float(info.max), -float(info.tiny), 3 * float(info.tiny), 0.0]
    for g in grads:
        g0 = torch.tensor(g, dtype=dtype)
        out = kernels.kl_div_backward(
            g0.to(device), t.to(device), t.to(device), reduction, True, backend=triton_backend
        )
        assert_within(out, kl_div.reference(g0, t, t, reduction, True), ulps_for(dtype))
    gs = torch.tensor(grads, dtype=dtype).repeat(t.numel() // len(grads) + 1)[: t.numel()]
    gs = gs[torch.randperm(t.numel(), generator=torch.Generator().manual_seed(5))]
    out = kernels.kl_div_backward(gs.to(device), t.to(device), t.to(device), reduction, True, backend=triton_backend)
    assert_within(out, kl_div.reference(gs, t, t, reduction, True), ulps_for(dtype))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_kl_log_target_16bit_meets_the_float64_reference_at_exp_s_ends(triton_backend: str, dtype: torch.dtype) -> None:
    """Past the clamp every product is 0 or inf, as the float64 formula's: exp(t) = 0 from t =
    -745.13324 down (0 * inf = NaN), inf from 709.7827 up (0 * inf = NaN for g = 0, which _kl_log's
    float32 outs give as -0: test_accuracy's documented departure); NaN in either operand is NaN.
    (float16 holds t up to 65504: 700, 712 and 1e4 reach those ends; bfloat16's 712 is 712.)"""
    device = backends.info(triton_backend).device_type
    ts = [-math.inf, -800.0, -745.5, -700.0, -300.0, -120.0, 0.0, 100.0, 300.0, 700.0, 712.0, 1e4, math.inf, math.nan]
    gs = [math.inf, -math.inf, 0.0, -0.0, 1.0, -3.0, math.nan]
    t, g = (v.reshape(-1).to(dtype) for v in torch.meshgrid(torch.tensor(ts), torch.tensor(gs), indexing="ij"))
    out = kernels.kl_div_backward(g.to(device), t.to(device), t.to(device), "sum", True, backend=triton_backend).cpu()
    ref = kl_div.reference(g, t, t, "sum", True)
    assert_within(out, ref, ulps_for(dtype))
    signed = ~ref.isnan()  # -0 and +0 as the reference's
    assert torch.equal(torch.signbit(out.float())[signed], torch.signbit(ref.to(dtype).float())[signed])


def test_device_math_flags_follow_the_backend_op_and_out_dtype_mock_launch_plumbing(
    triton_backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plumbing, with the kernels replaced by recorders (nothing launches): NARROW only for KL
    log_target's elementwise walks into a 16-bit out where the backend says its exp2 is the
    approximation, RNE only for bfloat16 outs where it says its cast rounds to nearest; a sum's
    lanes (RB) reduce_lanes' where sums are split, one where they are not (the NPU's launch)."""
    from kernels.backends import triton_loops

    seen: list[dict[str, object]] = []

    class Recorder:
        def __getitem__(self, grid: object) -> object:
            return lambda *args, **kwargs: seen.append(kwargs)

    for name in ("_loss_bwd_flat_kernel", "_loss_bwd_strided_kernel", "_loss_bwd_strided2d_kernel"):
        monkeypatch.setattr(triton_loops, name, Recorder())
    monkeypatch.setattr(triton_loops, "_loss_bwd_reduce_kernel", Recorder())

    def flags(op_log: bool, dtype: torch.dtype, *, approx: bool, rne: bool, reduce: bool = False) -> tuple[object, ...]:
        t = torch.randn(4, 6).to(dtype)
        x = torch.randn(1, 6).to(dtype) if reduce else t  # KL sums back to a smaller input
        _, ex = kernels.aclnn.kl_div_backward_get_workspace_size(
            torch.ones(4, 6, dtype=dtype), x, t, 1, op_log, torch.empty(x.shape, dtype=dtype), backend="cpu"
        )
        assert isinstance(ex, Executor)
        seen.clear()
        triton_loops.launch(ex, extra={}, approx_exp2=approx, rne_cast=rne)
        (kwargs,) = seen
        return kwargs.get("NARROW"), kwargs["RNE"]

    assert flags(True, torch.bfloat16, approx=True, rne=True) == (True, True)
    assert flags(True, torch.float16, approx=True, rne=True) == (True, False)
    assert flags(True, torch.float32, approx=True, rne=True) == (False, False)
    assert flags(False, torch.float16, approx=True, rne=True) == (False, False)  # KL's plain formula has no exp
    assert flags(True, torch.bfloat16, approx=False, rne=False) == (False, False)  # the NPU's launch
    assert flags(True, torch.bfloat16, approx=True, rne=True, reduce=True) == (None, True)  # sums keep _kl_log

    def lanes(split: bool) -> object:  # a sum of 64 terms: 4 lanes where sums are split, 1 on the NPU
        x = torch.randn(1, 6)
        _, ex = kernels.aclnn.kl_div_backward_get_workspace_size(
            torch.ones(64, 6), x, torch.randn(64, 6), 1, False, torch.empty(1, 6), backend="cpu"
        )
        assert isinstance(ex, Executor)
        seen.clear()
        triton_loops.launch(ex, extra={}, split_sums=split)
        (kwargs,) = seen
        return kwargs["RB"]

    assert lanes(True) == 4 and lanes(False) == 1

    passed: dict[str, object] = {}
    monkeypatch.setattr(triton_loops, "launch", lambda ex, **kwargs: passed.update(kwargs))
    _, ex = kernels.aclnn.kl_div_backward_get_workspace_size(
        torch.ones(8), torch.ones(8), torch.ones(8), 1, True, torch.empty(8), backend="cpu"
    )
    backends.get(triton_backend).launch(ex)
    expected = {"triton-interpret": (True, False), "cuda": (True, True)}[triton_backend]
    assert (passed.get("approx_exp2", False), passed.get("rne_cast", False)) == expected
