"""aclnnL1LossBackward.

Forward: ``loss = reduce(|self - target|)``. Backward, for every reduction::

    gradInput = sign(self - target) * (gradOutput * cof)      sign(0) = 0, sign(NaN) = 0
    cof = 1 / numel(broadcast shape)   for mean
    cof = 1                            for none and sum

The compute dtype is torch's promotion of gradOutput, self and target; it must be castable to
gradInput's dtype. sign(NaN) = 0 follows PyTorch and the newer CANN kernels (the older 910B kernel
gives -1; documented, not copied).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from kernels import dispatch
from kernels.errors import invalid
from kernels.executor import Executor, Formula
from kernels.modes import Op, Reduction
from kernels.plan import (
    broadcast,
    check_out_writable,
    check_same_device,
    check_tensor,
    dtype_name,
    elementwise_geometry,
)
from kernels.tiling import Tiling

_ZERO = np.float32(0.0)


def _value(g: float, x: float, t: float, cof: float) -> float:
    d = x - t
    # sign(d) as the difference of two comparisons: no branch, so a loop that cannot vectorise (a
    # strided walk) does not mispredict on random signs (10x the contiguous time, performance.md).
    # NaN compares false both ways: 0.
    s = np.float32(d > _ZERO) - np.float32(d < _ZERO)
    return s * (g * cof)


FORMULA = Formula("l1", _value, reads_input=True, triton_op=1, live_buffers=4)


def cof(reduction: Reduction, numel: int) -> float:
    return 1.0 / numel if reduction is Reduction.MEAN and numel > 0 else 1.0


def _sign(d: torch.Tensor) -> torch.Tensor:
    return torch.sign(torch.nan_to_num(d, nan=0.0, posinf=math.inf, neginf=-math.inf))


def reference(
    grad_output: torch.Tensor, input: torch.Tensor, target: torch.Tensor, reduction: object = "mean"
) -> torch.Tensor:
    red = Reduction.parse(reduction, allow_batchmean=False)
    g, x, t = (v.detach().cpu().double() for v in (grad_output, input, target))
    shape = torch.broadcast_shapes(g.shape, x.shape, t.shape)
    return (_sign(x - t) * (g * cof(red, math.prod(shape)))).expand(shape)


def vendor_baseline(
    grad_output: torch.Tensor, input: torch.Tensor, target: torch.Tensor, reduction: object = "mean"
) -> torch.Tensor:
    """torch_npu's aclnn op on NPU; elsewhere the eager expression autograd runs."""
    red = Reduction.parse(reduction, allow_batchmean=False)
    if input.device.type == "npu":
        return torch.ops.npu.l1_loss_backward(grad_output, input, target, int(red))
    shape = torch.broadcast_shapes(grad_output.shape, input.shape, target.shape)
    return torch.sign(input - target) * (grad_output * cof(red, math.prod(shape)))


def _call(reduction: object) -> tuple[object, ...]:
    """The plan cache's key for the non-tensor arguments (dispatch.plan_key)."""
    return (Op.L1, type(reduction), reduction)


def get_workspace_size(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object,
    grad_input: torch.Tensor | None,
    *,
    backend: str | None = None,
    config: Tiling | dict[str, object] | None = None,
    allocate: bool = False,
) -> tuple[int, Executor]:
    key = dispatch.plan_key(_call(reduction), grad_output, input, target, grad_input, backend, config, allocate)
    cached = dispatch.replay(key, grad_output, input, target, grad_input)
    if cached is not None:
        return cached.workspace_size, cached
    g = check_tensor("grad_output", grad_output)
    x = check_tensor("input", input)
    t = check_tensor("target", target)
    red = Reduction.parse(reduction, allow_batchmean=False)
    compute = torch.promote_types(torch.promote_types(g.dtype, x.dtype), t.dtype)
    shape = broadcast("grad_output, input, target", tuple(g.shape), tuple(x.shape), tuple(t.shape))
    device = check_same_device({"grad_output": g, "input": x, "target": t})
    if grad_input is None and allocate:
        grad_input = torch.empty(shape, dtype=compute, device=device)
    if isinstance(grad_input, torch.Tensor) and not torch.can_cast(compute, grad_input.dtype):
        raise invalid(
            "out", f"a dtype the compute dtype {dtype_name(compute)} can be cast to", dtype_name(grad_input.dtype)
        )
    o = check_tensor("out", grad_input)
    if tuple(o.shape) != shape:
        raise invalid("out", f"shape {shape} (broadcast of grad_output, input, target)", tuple(o.shape))
    check_out_writable("out", o)
    check_same_device({"input": x, "out": o})
    geometry = elementwise_geometry(g, x, t, o, shape)
    ex = dispatch.build(Op.L1, FORMULA, red, geometry, cof(red, geometry.numel), (g, x, t, o), compute, backend, config)
    dispatch.remember(key, ex)
    return ex.workspace_size, ex


def l1_loss_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object = "mean",
    *,
    out: torch.Tensor | None = None,
    backend: str | None = None,
    config: Tiling | dict[str, object] | None = None,
) -> torch.Tensor:
    """Both phases; allocates ``out`` in the promoted dtype when it is not given."""
    key = dispatch.plan_key(_call(reduction), grad_output, input, target, out, backend, config, True)
    done = dispatch.run_cached(key, grad_output, input, target, out)
    if done is not None:
        return done
    _, ex = get_workspace_size(
        grad_output, input, target, reduction, out, backend=backend, config=config, allocate=True
    )
    dispatch.run(ex)
    return ex.out
