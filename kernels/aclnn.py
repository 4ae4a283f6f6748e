"""The aclnn two-phase form of each op.

Phase one (``*_get_workspace_size``) validates every argument, resolves broadcast and dtypes and
picks the tiling config (explicit > frozen table > backend default); it writes nothing and
returns ``(workspace_size, executor)``. Phase two launches the executor. Like aclnn, ``out`` is an
argument of phase one and is required (None is 161001).
"""

from __future__ import annotations

import numbers

import torch

from kernels import dispatch
from kernels.errors import invalid
from kernels.executor import Executor
from kernels.ops import kl_div, l1, mse
from kernels.tiling import Tiling

Config = Tiling | dict[str, object] | None


def mse_loss_backward_get_workspace_size(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object,
    out: torch.Tensor,
    *,
    backend: str | None = None,
    config: Config = None,
) -> tuple[int, Executor]:
    return mse.get_workspace_size(grad_output, input, target, reduction, out, backend=backend, config=config)


def l1_loss_backward_get_workspace_size(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object,
    out: torch.Tensor,
    *,
    backend: str | None = None,
    config: Config = None,
) -> tuple[int, Executor]:
    return l1.get_workspace_size(grad_output, input, target, reduction, out, backend=backend, config=config)


def kl_div_backward_get_workspace_size(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object,
    log_target: bool,
    out: torch.Tensor,
    *,
    backend: str | None = None,
    config: Config = None,
) -> tuple[int, Executor]:
    return kl_div.get_workspace_size(
        grad_output, input, target, reduction, log_target, out, backend=backend, config=config
    )


def _launch(op: str, workspace: object, workspace_size: int, executor: Executor, stream: object) -> None:
    if not isinstance(executor, Executor) or executor.op.value != op:
        raise invalid("executor", f"an executor from {op}_..._get_workspace_size", type(executor).__name__)
    if isinstance(workspace_size, bool) or not isinstance(workspace_size, numbers.Integral):
        raise invalid("workspace_size", f"a whole number >= {executor.workspace_size}", repr(workspace_size))
    if workspace_size < executor.workspace_size:
        raise invalid("workspace_size", f">= {executor.workspace_size}", workspace_size)
    dispatch.run(executor)


def mse_loss_backward(workspace: object, workspace_size: int, executor: Executor, stream: object = None) -> None:
    _launch("mse", workspace, workspace_size, executor, stream)


def l1_loss_backward(workspace: object, workspace_size: int, executor: Executor, stream: object = None) -> None:
    _launch("l1", workspace, workspace_size, executor, stream)


def kl_div_backward(workspace: object, workspace_size: int, executor: Executor, stream: object = None) -> None:
    _launch("kl_div", workspace, workspace_size, executor, stream)
