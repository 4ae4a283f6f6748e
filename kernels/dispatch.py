"""Phase one's shared tail (backend, space, config choice), the plan cache, and phase two's launch.

The plan cache: every check and decision of phase one reads tensor metadata only (dtype, shape,
strides, device), never values, and the frozen tables are read once per process. So a call whose
metadata and arguments match an earlier successful one gets that call's plan again, in a few
microseconds instead of the ~60 us the full phase one takes in Python; that cost was 6x the kernel
at 2^16 elements (results/performance.md). Phase one's replay binds the plan to the call's tensors
(:func:`replay`); a public call's launches the plan's launcher on them where it has one, binding
nothing (:func:`run_cached`). Calls with an explicit config always take the full path, and a call
that failed is never cached, so every error is still raised.
"""

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
        formula.log_target,
    )
    if config is not None:
        if isinstance(config, dict):
            try:
                config = Tiling.from_dict(config)
            except (TypeError, ValueError) as e:
                raise invalid("config", "a Tiling or a dict of its knobs", f"{config!r} ({e})") from e
        if not isinstance(config, Tiling):
            raise invalid("config", "a kernels.Tiling", type(config).__name__)
        try:
            config.check_types()
        except TypeError as e:
            raise invalid("config", "a Tiling whose knobs have their types", f"{config!r} ({e})") from None
        broken = space.violations(config)
        if broken:
            raise invalid(
                "config", f"a member of the {be.name} space for {key.label()}", f"{config.short()}: {'; '.join(broken)}"
            )
        chosen, source = config, "explicit"
    else:
        found = frozen.lookup(be.name, facts.lookup_names, key, space)
        chosen, source = found if found is not None else (space.default, "default")
    ex = Executor(op, formula, be.name, facts.name, chosen, source, space, key, geometry, cof, grad, inp, target, out)
    # A backend may have no launcher (Triton's launch is its own Python each call): the field stays None.
    prepare = getattr(be, "launcher", None)
    if prepare is not None:
        object.__setattr__(ex, "launcher", prepare(ex))  # a frozen field, set once as the plan is made
    return ex


PLAN_LIMIT = 1024  # distinct call signatures kept; past it the cache starts over (a training loop has few)
# key -> (the plan without its tensors, (shape, dtype, device) of the out a call without one gets)
_plans: dict[tuple[object, ...], tuple[Executor, tuple[object, object, object]]] = {}
_Tensor = torch.Tensor
# Which tables a key's plan may come from: clear_plans (frozen.reset) moves it on, and every key
# holds the epoch it was built in. A call that read the old table and reaches remember after
# another thread's reset stores its plan under a key of the old epoch, which no later call builds.
_epoch = 0


def plan_key(
    call: tuple[object, ...],
    grad: object,
    inp: object,
    target: object,
    out: object,
    backend: object,
    config: object,
    allocate: bool,
) -> tuple[object, ...] | None:
    """What phase one reads of a call, or None when it must take the full path (explicit config,
    something not a tensor). ``call`` holds the op and its non-tensor arguments with their types,
    so that e.g. ``True`` is not taken for ``1``.

    One flat tuple of each tensor's dtype, shape, strides and device, ``out``'s nested (or None):
    a tuple per tensor cost the cached call 0.7-0.9 us more on the Zen 3, in building and hashing
    (results/performance.md, section 84). The key is built on every call, hit or miss, before
    anything reads a table, so it carries the epoch of the tables that call's plan can come from."""
    if config is not None:
        return None
    if not (isinstance(grad, _Tensor) and isinstance(inp, _Tensor) and isinstance(target, _Tensor)):
        return None
    if out is None:
        held: object = None
    elif isinstance(out, _Tensor):
        held = (out.dtype, out.shape, out.stride(), out.device)
    else:
        return None
    return (
        call,
        backend,
        allocate,
        _epoch,
        grad.dtype,
        grad.shape,
        grad.stride(),
        grad.device,
        inp.dtype,
        inp.shape,
        inp.stride(),
        inp.device,
        target.dtype,
        target.shape,
        target.stride(),
        target.device,
        held,
    )


def _hit(key: tuple[object, ...] | None) -> tuple[Executor, tuple[object, object, object]] | None:
    if key is None:
        return None
    try:
        return _plans.get(key)
    except TypeError:  # an unhashable argument: the full path says what is wrong with it
        return None


def replay(
    key: tuple[object, ...] | None,
    grad: torch.Tensor,
    inp: torch.Tensor,
    target: torch.Tensor,
    out: torch.Tensor | None,
) -> Executor | None:
    """The cached plan for ``key`` bound to these tensors (``out`` allocated when None), else None:
    phase one's replay, which hands back an executor."""
    hit = _hit(key)
    if hit is None:
        return None
    template, (shape, dtype, device) = hit
    if out is None:
        out = torch.empty(shape, dtype=dtype, device=device)  # type: ignore[arg-type]
    return template.bind(grad, inp, target, out)


def run_cached(
    key: tuple[object, ...] | None,
    grad: torch.Tensor,
    inp: torch.Tensor,
    target: torch.Tensor,
    out: torch.Tensor | None,
) -> torch.Tensor | None:
    """Both phases of a call whose plan is cached: its launch over these tensors (``out``
    allocated when None), and the out written; None when nothing is cached for ``key``.

    The public functions' replay. Where the plan has a launcher (the CPU's contiguous loops), no
    executor is bound: the caller gets only the out back, and binding one took 1.0-1.9 us a call on
    the Zen 3 (results/performance.md, sections 75 and 84). Elsewhere it binds and runs as phase two does."""
    if key is None:
        return None
    try:  # _hit written out: this is the hot path, and a call costs it 50-60 ns
        hit = _plans.get(key)
    except TypeError:
        return None
    if hit is None:
        return None
    template, (shape, dtype, device) = hit
    if out is None:
        out = torch.empty(shape, dtype=dtype, device=device)  # type: ignore[arg-type]
    go = template.launcher
    if go is not None:
        go(grad, inp, target, out)
    else:
        run(template.bind(grad, inp, target, out))
    return out


def remember(key: tuple[object, ...] | None, executor: Executor) -> None:
    """Keep a successful phase one's plan, without its tensors (a cache must not hold data alive)."""
    if key is None:
        return
    if len(_plans) >= PLAN_LIMIT:
        _plans.clear()
    out = executor.out
    try:
        _plans[key] = (executor.unbound(), (out.shape, out.dtype, out.device))
    except TypeError:
        pass


def clear_plans() -> None:
    """Drop every plan, and retire the keys built so far (_epoch): a call under way keeps its key,
    so the plan it makes from the table it read is never replayed."""
    global _epoch
    _epoch += 1
    _plans.clear()


# A plan holds the config its table gave: writing a table (tuner.freeze) must drop them.
frozen.on_reset(clear_plans)


def run(executor: Executor) -> None:
    """Phase two: launch (nothing at all for an empty problem), through the plan's launcher where
    its backend made one."""
    go = executor.launcher
    if go is not None:
        go(executor.grad, executor.inp, executor.target, executor.out)
        return
    if executor.empty:
        return
    backends.get(executor.backend).launch(executor)
