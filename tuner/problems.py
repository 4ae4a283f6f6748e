"""Tuning cases: one op x dtype x shape x reduction, with its inputs, reference and baseline."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

import torch

import kernels
from kernels import accuracy, aclnn
from kernels.executor import Executor
from kernels.modes import Op, Reduction
from kernels.ops import kl_div, l1, mse
from kernels.plan import dtype_name, parse_dtype
from kernels.tiling import Tiling


class InputLayout(str, Enum):
    """How a case's tensors are handed over; the same elements and values whatever the layout
    (SUMMED's input: the first of its 64 rows)."""

    CONTIGUOUS = "contiguous"
    BROADCAST = "broadcast"  # target is one row broadcast over 64 rows: a stride-0 operand, no copy
    TRANSPOSED = "transposed"  # input, target (and a full gradient) are transposed views, 64 rows
    # KL only: input is one row against target's 64, so its gradient is summed back over them
    # (SEMANTICS: out has self's shape; Layout.REDUCE)
    SUMMED = "summed"

    @classmethod
    def parse(cls, text: str) -> InputLayout:
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"layout: expected one of {', '.join(v.value for v in cls)}, got {text!r}") from None


LAYOUT_ROWS = 64


@dataclass(frozen=True)
class Case:
    """One tuning problem. mean/sum send a 0-d gradient, as autograd does; none a full one."""

    op: Op
    dtype: torch.dtype
    shape: tuple[int, ...]
    reduction: Reduction
    log_target: bool = False
    layout: InputLayout = InputLayout.CONTIGUOUS

    def __post_init__(self) -> None:
        if self.layout is not InputLayout.CONTIGUOUS and (len(self.shape) != 1 or self.numel % LAYOUT_ROWS):
            raise ValueError(
                f"layout: {self.layout.value} needs a 1-d shape of a multiple of {LAYOUT_ROWS} elements,"
                f" got {self.shape}"
            )
        if self.layout is InputLayout.SUMMED and self.op is not Op.KL_DIV:
            # MSE's and L1's out has the broadcast shape: an input smaller than it is never summed back.
            raise ValueError(f"layout: summed is KL's alone (kl_div, kl_div-log), got op {self.op.value}")

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    def label(self) -> str:
        shape = "x".join(map(str, self.shape)) or "0d"
        log = "-log" if self.log_target else ""
        where = "" if self.layout is InputLayout.CONTIGUOUS else f" {self.layout.value}"
        return f"{self.op.value}{log} {dtype_name(self.dtype)} {shape}{where} {self.reduction.name.lower()}"

    def inputs(
        self, device: torch.device | str, seed: int = 0, *, fill: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Seeded values, laid out as ``layout`` says: BROADCAST and TRANSPOSED are views of shape
        (64, numel / 64) over the same count of elements, never copies; SUMMED's input is the
        first row of that shape, (1, numel / 64), against target's 64. ``fill=False``: the same
        shapes and strides left unfilled, for what reads only them (a config lookup), since seeded
        values at 2^26 take seconds a case."""
        grad_shape = self.shape if self.reduction is Reduction.NONE else ()
        if fill:
            gen = torch.Generator().manual_seed(seed)
            g = torch.randn(grad_shape, generator=gen) * 1.5 + 0.25
            x = torch.randn(self.shape, generator=gen)
            draw = torch.rand if self.op is Op.KL_DIV else torch.randn  # KL's target: probabilities
            t = draw(self.shape, generator=gen)
            g, x, t = (v.to(self.dtype).to(device) for v in (g, x, t))
        else:
            g = torch.empty(grad_shape, dtype=self.dtype, device=device)
            x, t = (torch.empty(self.shape, dtype=self.dtype, device=device) for _ in range(2))
        rows, cols = LAYOUT_ROWS, self.numel // LAYOUT_ROWS
        if self.layout is InputLayout.BROADCAST:
            return (
                (g.reshape(rows, cols) if g.dim() else g),
                x.reshape(rows, cols),
                t.reshape(rows, cols)[:1].expand(rows, cols),
            )
        if self.layout is InputLayout.TRANSPOSED:

            def view(v: torch.Tensor) -> torch.Tensor:
                return v.reshape(cols, rows).t()

            return (view(g) if g.dim() else g), view(x), view(t)
        if self.layout is InputLayout.SUMMED:
            return (g.reshape(rows, cols) if g.dim() else g), x.reshape(rows, cols)[:1], t.reshape(rows, cols)
        return g, x, t

    def read_tensors(self, g: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> list[torch.Tensor]:
        """The inputs the op must read (KL never reads input's values)."""
        return [g, t] if self.op is Op.KL_DIV else [g, x, t]

    def phase_one(
        self,
        g: torch.Tensor,
        x: torch.Tensor,
        t: torch.Tensor,
        out: torch.Tensor,
        backend: str,
        config: Tiling | None = None,
    ) -> Executor:
        red = int(self.reduction)
        if self.op is Op.MSE:
            return aclnn.mse_loss_backward_get_workspace_size(g, x, t, red, out, backend=backend, config=config)[1]
        if self.op is Op.L1:
            return aclnn.l1_loss_backward_get_workspace_size(g, x, t, red, out, backend=backend, config=config)[1]
        return aclnn.kl_div_backward_get_workspace_size(
            g, x, t, red, self.log_target, out, backend=backend, config=config
        )[1]

    def out_like(self, x: torch.Tensor) -> torch.Tensor:
        """A contiguous out of the input's shape (the inputs' broadcast shape, but for SUMMED)."""
        return torch.empty(x.shape, dtype=self.dtype, device=x.device)

    def reference(self, g: torch.Tensor, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if self.op is Op.MSE:
            return mse.reference(g, x, t, self.reduction)
        if self.op is Op.L1:
            return l1.reference(g, x, t, self.reduction)
        return kl_div.reference(g, x, t, self.reduction, self.log_target)

    def mismatch(
        self, out: torch.Tensor, ref: torch.Tensor, g: torch.Tensor, x: torch.Tensor, t: torch.Tensor
    ) -> str | None:
        """SEMANTICS' bar for ``out`` against the reference (accuracy.mismatch): the dtype's ulps, or
        for KL's summed layout relative SUM_REL of the summed magnitudes. A sum that cancels keeps
        its terms' error: the elementwise bar, relative to the small result, would fail a correct
        sum (4e-7 off an output of 1.4e-4 whose 64 terms are of order 1)."""
        if self.layout is not InputLayout.SUMMED:
            return accuracy.mismatch(out, ref)
        # |terms| summed back: KL's reference over |g| (and |t| where the term is t itself; exp(t) > 0).
        scale = kl_div.reference(g.abs(), x, t if self.log_target else t.abs(), self.reduction, self.log_target)
        return accuracy.mismatch(out, ref, accuracy.SUM_ULPS[self.dtype], rel_to=scale.abs(), rel=accuracy.SUM_REL)

    def baseline(self) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]:
        """The vendor baseline of SEMANTICS.md for this op on the tensors' device."""
        if self.op is Op.MSE:
            return lambda g, x, t: mse.vendor_baseline(g, x, t, self.reduction)
        if self.op is Op.L1:
            return lambda g, x, t: l1.vendor_baseline(g, x, t, self.reduction)
        return lambda g, x, t: kl_div.vendor_baseline(g, x, t, self.reduction, self.log_target)

    def baseline_into(self) -> Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None:
        """PyTorch's own backward kernel written into a given out, where PyTorch ships one with an
        out= form: mse's (aten mse_loss_backward.grad_input). The baseline allocates its result
        every call and zero-fills it before this kernel writes it; at 2^24-2^26 float32 that call
        took 3.5-4.6x the time of this one on the Zen 5's 4 KiB pages (results/performance.md,
        section 87). This is the yardstick without them, the way our kernel is timed. None for L1
        and KL, whose PyTorch backward is a chain of eager ops, each allocating its own temporary:
        no one kernel to hand an out."""
        if self.op is not Op.MSE:
            return None
        red = int(self.reduction)
        return lambda g, x, t, out: torch.ops.aten.mse_loss_backward.grad_input(g, x, t, red, grad_input=out)


def parse_shape(text: str) -> tuple[int, ...]:
    """'1048576', '2^20', '41x401x1271' or '' (0-d); every size 1 or more."""
    try:
        if "^" in text:
            base, exp = (int(p) for p in text.split("^"))
            if exp < 0:
                raise ValueError
            shape: tuple[int, ...] = (base**exp,)
        else:
            shape = tuple(int(p) for p in text.split("x")) if text else ()
    except ValueError:
        raise ValueError(f"shape: expected N, B^E or AxBxC, got {text!r}") from None
    if any(n < 1 for n in shape):
        raise ValueError(f"shape: expected sizes of 1 or more, got {text!r}")
    return shape


def parse_op(text: str) -> tuple[Op, bool]:
    """'mse', 'l1', 'kl_div' or 'kl_div-log' (log_target)."""
    name, _, mode = text.partition("-")
    try:
        op = Op(name)
    except ValueError:
        raise ValueError(f"op: expected mse, l1, kl_div or kl_div-log, got {text!r}") from None
    if mode not in ("", "log") or (mode and op is not Op.KL_DIV):
        raise ValueError(f"op: expected mse, l1, kl_div or kl_div-log, got {text!r}")
    return op, mode == "log"


ALL_OPS = ("mse", "l1", "kl_div")

# Named suites: (ops, dtypes, shapes, reductions). "main" is the README's CPU job: every op (KL both ways), the
# full and the 0-d gradient, three sizes across the cache hierarchy of a small host.
SUITES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "main": ((*ALL_OPS, "kl_div-log"), ("float32",), ("2^16", "2^20", "2^23"), ("none", "mean")),
    "quick": (ALL_OPS, ("float32",), ("2^12",), ("none",)),
    "dtypes": (ALL_OPS, ("float32", "float16", "bfloat16"), ("2^20",), ("none", "mean")),
}


def build_cases(
    ops: tuple[str, ...],
    dtypes: tuple[str, ...],
    shapes: tuple[str, ...],
    reductions: tuple[str, ...],
    layouts: tuple[str, ...] = ("contiguous",),
) -> list[Case]:
    cases = []
    for op_text in ops:
        op, log = parse_op(op_text)
        for dtype in dtypes:
            for shape in shapes:
                for layout in layouts:
                    for red in reductions:
                        reduction = Reduction.parse(red, allow_batchmean=op is Op.KL_DIV)
                        where = InputLayout.parse(layout)
                        cases.append(Case(op, parse_dtype(dtype), parse_shape(shape), reduction, log, where))
    return cases


def suite(name: str) -> list[Case]:
    if name not in SUITES:
        raise ValueError(f"suite: expected one of {', '.join(SUITES)}, got {name!r}")
    return build_cases(*SUITES[name])


__all__ = ["Case", "InputLayout", "SUITES", "build_cases", "kernels", "parse_op", "parse_shape", "suite"]
