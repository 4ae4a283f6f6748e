"""Phase one's shared tail (backend, space, config choice) and phase two's launch."""

from __future__ import annotations

import torch

from kernels import backends, frozen
from kernels.errors import invalid
from kernels.executor import Executor, Formula, ProblemKey, reduction_kind, size_bucket
from kernels.modes import Op, Reduction
from kernels.plan import Geometry, dtype_name
from kernels.tiling import Tiling


def resolve_backend(name: str | None, device: torch.device) -> backends.Backend:
    """The named backend (which must serve this device), else the device's own."""
    if name is None:
        return backends.get(backends.for_device(device))
    backend = backends.get(name)  # first, so a backend that cannot load says what is missing
    if backend.device_type != device.type:
        raise invalid("backend", f"a backend for tensors on {device.type}", f"{name!r} (runs on {backend.device_type})")
    return backend


def build(
    op: Op,
    formula: Formula,
    reduction: Reduction,
    geometry: Geometry,
    cof: float,
    tensors: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    key_dtype: torch.dtype,
    backend: str | None,
    config: Tiling | dict[str, object] | None,
) -> Executor:
    grad, inp, target, out = tensors
    be = resolve_backend(backend, out.device)
    facts = be.facts()
    space = be.space(formula, geometry, key_dtype)
    key = ProblemKey(
        op,
        dtype_name(key_dtype),
        size_bucket(geometry.numel),
        geometry.grad_kind,
        geometry.layout,
        reduction_kind(reduction),
    )
    if config is not None:
        if isinstance(config, dict):
            try:
                config = Tiling.from_dict(config)
            except (TypeError, ValueError) as e:
                raise invalid("config", "a Tiling or a dict of its knobs", f"{config!r} ({e})") from e
        if not isinstance(config, Tiling):
            raise invalid("config", "a kernels.Tiling", type(config).__name__)
        broken = space.violations(config)
        if broken:
            raise invalid(
                "config", f"a member of the {be.name} space for {key.label()}", f"{config.short()}: {'; '.join(broken)}"
            )
        chosen, source = config, "explicit"
    else:
        found = frozen.lookup(be.name, facts.name, key, space)
        chosen, source = found if found is not None else (space.default, "default")
    return Executor(op, formula, be.name, facts.name, chosen, source, space, key, geometry, cof, grad, inp, target, out)


def run(executor: Executor) -> None:
    """Phase two: launch (nothing at all for an empty problem)."""
    if executor.empty:
        return
    backends.get(executor.backend).launch(executor)
