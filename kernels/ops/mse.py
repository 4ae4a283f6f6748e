"""aclnnMseLossBackward.

Forward: ``loss = reduce((self - target)^2)``. Backward, for every reduction::

    out = ((self - target) * cof) * gradOutput          (evaluated in exactly this order)
    cof = 2 / numel(self)   for mean     (self's count, not the broadcast output's: CANN and aten agree)
    cof = 2                 for none and sum

``gradOutput`` and ``target`` must have ``self``'s dtype; ``out`` may be any supported float dtype
and has the broadcast shape of the three. 16-bit inputs are computed in float32, rounded once.
With mean or sum autograd passes a 0-d ``gradOutput``: the scalar_grad variant reads it once.
"""

from __future__ import annotations

import torch

from kernels import dispatch
from kernels.errors import invalid
from kernels.executor import Executor, Formula
from kernels.modes import FusedForm, Op, Reduction
from kernels.plan import (
    broadcast,
    check_out_writable,
    check_same_device,
    check_tensor,
    dtype_name,
    elementwise_geometry,
)
from kernels.tiling import Tiling


def _value(g: float, x: float, t: float, cof: float) -> float:
    return ((x - t) * cof) * g


FORMULA = Formula("mse", _value, reads_input=True, triton_op=0, live_buffers=4, fused_form=FusedForm.SCALED_DIFFERENCE)


def cof(reduction: Reduction, input_numel: int) -> float:
    return 2.0 / input_numel if reduction is Reduction.MEAN and input_numel > 0 else 2.0


def reference(
    grad_output: torch.Tensor, input: torch.Tensor, target: torch.Tensor, reduction: object = "mean"
) -> torch.Tensor:
    """The float64 truth on the CPU, broadcast shape."""
    red = Reduction.parse(reduction, allow_batchmean=False)
    g, x, t = (v.detach().cpu().double() for v in (grad_output, input, target))
    return ((x - t) * cof(red, input.numel())) * g


def vendor_baseline(
    grad_output: torch.Tensor, input: torch.Tensor, target: torch.Tensor, reduction: object = "mean"
) -> torch.Tensor:
    """What a user calls today on any backend: aten's own kernel (aclnn on NPU)."""
    red = Reduction.parse(reduction, allow_batchmean=False)
    return torch.ops.aten.mse_loss_backward(grad_output, input, target, int(red))


def _call(reduction: object) -> tuple[object, ...]:
    """The plan cache's key for the non-tensor arguments (dispatch.plan_key)."""
    return (Op.MSE, type(reduction), reduction)


def get_workspace_size(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object,
    out: torch.Tensor | None,
    *,
    backend: str | None = None,
    config: Tiling | dict[str, object] | None = None,
    allocate: bool = False,
) -> tuple[int, Executor]:
    """Phase one: validate everything, resolve broadcast, pick the config. Writes nothing."""
    key = dispatch.plan_key(_call(reduction), grad_output, input, target, out, backend, config, allocate)
    cached = dispatch.replay(key, grad_output, input, target, out)
    if cached is not None:
        return cached.workspace_size, cached
    g = check_tensor("grad_output", grad_output)
    x = check_tensor("input", input)
    t = check_tensor("target", target)
    red = Reduction.parse(reduction, allow_batchmean=False)
    if g.dtype != x.dtype:
        raise invalid("grad_output", f"dtype {dtype_name(x.dtype)} (input's; no promotion)", dtype_name(g.dtype))
    if t.dtype != x.dtype:
        raise invalid("target", f"dtype {dtype_name(x.dtype)} (input's; no promotion)", dtype_name(t.dtype))
    shape = broadcast("grad_output, input, target", tuple(g.shape), tuple(x.shape), tuple(t.shape))
    device = check_same_device({"grad_output": g, "input": x, "target": t})
    if out is None and allocate:
        out = torch.empty(shape, dtype=x.dtype, device=device)
    o = check_tensor("out", out)
    if tuple(o.shape) != shape:
        raise invalid("out", f"shape {shape} (broadcast of grad_output, input, target)", tuple(o.shape))
    check_out_writable("out", o)
    check_same_device({"input": x, "out": o})
    geometry = elementwise_geometry(g, x, t, o, shape)
    ex = dispatch.build(Op.MSE, FORMULA, red, geometry, cof(red, x.numel()), (g, x, t, o), x.dtype, backend, config)
    dispatch.remember(key, ex)
    return ex.workspace_size, ex


def mse_loss_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object = "mean",
    *,
    out: torch.Tensor | None = None,
    backend: str | None = None,
    config: Tiling | dict[str, object] | None = None,
) -> torch.Tensor:
    """Both phases; allocates ``out`` (input's dtype) when it is not given."""
    key = dispatch.plan_key(_call(reduction), grad_output, input, target, out, backend, config, True)
    done = dispatch.run_cached(key, grad_output, input, target, out)
    if done is not None:
        return done
    _, ex = get_workspace_size(
        grad_output, input, target, reduction, out, backend=backend, config=config, allocate=True
    )
    dispatch.run(ex)
    return ex.out
