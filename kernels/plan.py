"""Phase one, common part: argument checks, broadcasting and the loop geometry of a call.

Every op validates its tensors here, then describes its iteration space as a :class:`Geometry`:
the coalesced shape and per-operand element strides a strided kernel walks, and the layout class
that decides which kernel variants are legal. Nothing here touches tensor data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from kernels.errors import invalid, null_error
from kernels.modes import GradKind, Layout, Variant

SUPPORTED_DTYPES: tuple[torch.dtype, ...] = (torch.float32, torch.float16, torch.bfloat16)
MAX_RANK = 8
DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


def parse_dtype(name: str) -> torch.dtype:
    for dtype, text in DTYPE_NAMES.items():
        if name in (text, {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[text]):
            return dtype
    raise ValueError(f"dtype: expected one of {', '.join(DTYPE_NAMES.values())}, got {name!r}")


def check_tensor(arg: str, value: object, *, dtype_rule: bool = True) -> torch.Tensor:
    """None is 161001; a non-tensor, an unsupported dtype or more than 8 dims is 161002."""
    if value is None:
        raise null_error(arg)
    if not isinstance(value, torch.Tensor):
        raise invalid(arg, "a torch.Tensor", type(value).__name__)
    if dtype_rule and value.dtype not in SUPPORTED_DTYPES:
        raise invalid(arg, "dtype float32, float16 or bfloat16", dtype_name(value.dtype))
    if value.dim() > MAX_RANK:
        raise invalid(arg, f"at most {MAX_RANK} dims", f"{value.dim()} dims {tuple(value.shape)}")
    return value


def broadcast(names: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:
        raise invalid(names, "shapes that broadcast together", " and ".join(str(tuple(s)) for s in shapes)) from None


def check_same_device(tensors: dict[str, torch.Tensor]) -> torch.device:
    devices = {name: t.device for name, t in tensors.items()}
    first = next(iter(devices.values()))
    for name, device in devices.items():
        if device != first:
            raise invalid(name, f"a tensor on {first} like the other arguments", f"a tensor on {device}")
    return first


# Above this many elements a layout the stride test below cannot clear is refused unread: listing its
# offsets would take 8 bytes an element.
_OVERLAP_LISTED = 1 << 24


def check_out_writable(arg: str, out: torch.Tensor) -> None:
    """A written tensor must not map two elements to one address: an expanded view (a stride 0), or
    any view whose strides fold elements onto each other (``as_strided`` with steps smaller than the
    dims inside them): the kernels' stores would race there, and the result would hang on the order
    they land in. Dims by increasing stride, each stride past the farthest offset the dims before it
    reach, proves the elements apart (every layout torch makes: contiguous, transposed, sliced with
    steps); a layout that fails that test has its offsets listed and compared."""
    if out.is_contiguous():  # most calls' out: the test below, passed, at a tenth of its cost
        return
    dims = sorted((stride, size) for size, stride in zip(out.shape, out.stride(), strict=True) if size > 1)
    for stride, _ in dims:
        if stride == 0:
            raise invalid(arg, "a tensor without overlapping elements", f"an expanded view with strides {out.stride()}")
    reach = 0
    for stride, size in dims:
        if stride <= reach:
            break
        reach += stride * (size - 1)
    else:
        return
    got = f"a view of shape {tuple(out.shape)} with strides {out.stride()}"
    if out.numel() > _OVERLAP_LISTED:
        expected = f"a tensor whose strides show its elements apart (or of {_OVERLAP_LISTED} elements or fewer)"
        raise invalid(arg, expected, got)
    offsets = torch.zeros((), dtype=torch.int64)
    for size, stride in zip(out.shape, out.stride(), strict=True):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.int64) * stride
    if torch.unique(offsets.flatten()).numel() != out.numel():
        raise invalid(arg, "a tensor without overlapping elements", f"{got}, whose elements share addresses")


@dataclass(frozen=True)
class Geometry:
    """The iteration space of one call.

    ``shape``/``strides`` describe the elementwise walk (for REDUCE: the kept, output dims) with one
    stride tuple per operand in the order grad, input, target, out; ``rshape``/``rstrides`` the summed
    dims of a REDUCE call (grad, input, target). Dims are coalesced, innermost last, at least one.
    """

    layout: Layout
    grad_kind: GradKind
    numel: int  # elements of the broadcast space (what is computed)
    n_out: int  # elements written
    shape: tuple[int, ...]
    strides: tuple[tuple[int, ...], ...]
    rshape: tuple[int, ...] = ()
    rstrides: tuple[tuple[int, ...], ...] = ()

    @property
    def variants(self) -> tuple[Variant, ...]:
        """The legal variants, the vendor's pick first."""
        if self.layout is Layout.REDUCE:
            return (Variant.REDUCE,)
        if self.layout is Layout.STRIDED or self.layout is Layout.TRANSPOSED:
            return (Variant.STRIDED,)
        if self.grad_kind is GradKind.SCALAR and self.numel > 1:
            return (Variant.SCALAR_GRAD, Variant.STRIDED)
        return (Variant.FLAT, Variant.STRIDED)


def coalesce(
    shape: tuple[int, ...], strides: list[tuple[int, ...]]
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Drop size-1 dims and merge neighbours that are contiguous for every operand (TensorIterator's trick)."""
    dims = [d for d, size in enumerate(shape) if size != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for d in dims:
        if out_shape and all(s[d] * shape[d] == o[-1] for s, o in zip(strides, out_strides, strict=True)):
            out_shape[-1] *= shape[d]
            for s, o in zip(strides, out_strides, strict=True):
                o[-1] = s[d]
            continue
        out_shape.append(shape[d])
        for s, o in zip(strides, out_strides, strict=True):
            o.append(s[d])
    if not out_shape:
        return (1,), tuple((0,) for _ in strides)
    return tuple(out_shape), tuple(tuple(o) for o in out_strides)


def reorder(
    shape: tuple[int, ...], strides: list[tuple[int, ...]], sizes: list[int]
) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Order dims outer to inner so the innermost walks most operand bytes at unit-like strides.

    Dim a goes inside dim b when the operands that step through a with the smaller stride carry
    more bytes per element than those that prefer b (broadcast, stride-0 operands abstain); ties
    keep the output's order. A transposed input with a contiguous output then walks the inputs
    row by row and scatters only the output (measured in results/performance.md), where the
    output's order walked every input across cache lines.
    """

    def inner_votes(a: int, b: int) -> int:
        votes = 0
        for st, size in zip(strides, sizes, strict=True):
            if st[a] == 0 or st[b] == 0 or st[a] == st[b]:
                continue
            votes += size if st[a] < st[b] else -size
        return votes

    order: list[int] = []  # outer to inner
    for d in range(len(shape)):
        pos = len(order)
        # d arrives as the innermost so far; move it outward past dims that should be inside it.
        while pos > 0 and inner_votes(order[pos - 1], d) > 0:
            pos -= 1
        order.insert(pos, d)
    return tuple(shape[d] for d in order), [tuple(st[d] for d in order) for st in strides]


def _dense(t: torch.Tensor, shape: tuple[int, ...]) -> bool:
    return tuple(t.shape) == shape and t.is_contiguous()


def _expanded_strides(t: torch.Tensor, shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(t.expand(shape).stride()) if shape else ()


def elementwise_geometry(
    grad: torch.Tensor, inp: torch.Tensor, target: torch.Tensor, out: torch.Tensor, shape: tuple[int, ...]
) -> Geometry:
    """The walk over ``shape`` (= out.shape) reading every operand through broadcast strides."""
    numel = math.prod(shape)
    grad_kind = GradKind.SCALAR if grad.numel() == 1 else GradKind.FULL
    dense_rest = _dense(inp, shape) and _dense(target, shape) and _dense(out, shape)
    dense_grad = _dense(grad, shape) or grad_kind is GradKind.SCALAR
    layout = Layout.CONTIGUOUS if dense_rest and dense_grad else Layout.STRIDED
    operands = (grad, inp, target, out)
    strides = [_expanded_strides(t, shape) for t in operands]
    if layout is Layout.STRIDED:
        shape, strides = reorder(shape, strides, [t.element_size() for t in operands])
    cshape, cstrides = coalesce(shape, strides)
    if layout is Layout.STRIDED and dense_in_memory_order(cstrides, grad_kind):
        layout = Layout.CONTIGUOUS
    if layout is Layout.STRIDED and transposed(cstrides[3]):
        layout = Layout.TRANSPOSED
    return Geometry(layout, grad_kind, numel, numel, cshape, cstrides)


def dense_in_memory_order(strides: tuple[tuple[int, ...], ...], grad_kind: GradKind) -> bool:
    """Whether a reordered, coalesced walk is one run of consecutive elements in every operand (a
    0-d gradient read once): operands that share one dense layout, whatever it is (transposed,
    permuted, channels-last), or that differ only by size-1 dims. Element i of the flat loops is
    then element i of each operand's memory from its first address, as for contiguous tensors,
    and those loops run it, with the contiguous tables' configs: 0.94-1.01x the contiguous case's
    time at 2^22 with every operand one transposed view, where the strided walk took up to 1.22x
    (the exp-bound kl_div-log rows; results/performance.md, section 48)."""
    if len(strides[3]) != 1:
        return False
    grad_ok = strides[0] == (0,) if grad_kind is GradKind.SCALAR else strides[0] == (1,)
    return grad_ok and all(s == (1,) for s in strides[1:])


def transposed(out_strides: tuple[int, ...]) -> bool:
    """Whether a coalesced, reordered 2-d walk writes out along its outer dim: reorder put the
    inputs' unit stride inside, so the inputs and out disagree on which dim is contiguous."""
    return len(out_strides) == 2 and out_strides[0] == 1 != out_strides[1]


def reduce_geometry(
    grad: torch.Tensor, inp: torch.Tensor, target: torch.Tensor, out: torch.Tensor, space: tuple[int, ...]
) -> Geometry:
    """KL: the walk over B = broadcast(input, target) whose values are summed back to input's shape."""
    ndim = len(space)
    out_shape = (1,) * (ndim - out.dim()) + tuple(out.shape)
    reduced = [d for d in range(ndim) if out_shape[d] == 1 and space[d] > 1]
    kept = [d for d in range(ndim) if d not in reduced]
    strides = [_expanded_strides(t, space) for t in (grad, inp, target)]
    out_view = out[(None,) * (ndim - out.dim())]  # leading size-1 dims, always a view
    out_strides = _expanded_strides(out_view, space)
    kshape, kstrides = coalesce(
        tuple(space[d] for d in kept), [tuple(s[d] for d in kept) for s in (*strides, out_strides)]
    )
    rshape, rstrides = coalesce(tuple(space[d] for d in reduced), [tuple(s[d] for d in reduced) for s in strides])
    grad_kind = GradKind.SCALAR if grad.numel() == 1 else GradKind.FULL
    return Geometry(Layout.REDUCE, grad_kind, math.prod(space), out.numel(), kshape, kstrides, rshape, rstrides)
