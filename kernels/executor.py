"""The aclnn executor: everything phase one decided, ready for phase two to launch."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from kernels.modes import FusedForm, GradKind, Layout, Op, Reduction
from kernels.plan import Geometry, dtype_name
from kernels.tiling import Space, Tiling

# (grad, input, target, out): a launch bound to a plan, taking only the tensors (Executor.launcher)
Launcher = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], None]


@dataclass(frozen=True)
class Formula:
    """The scalar formula of one op (and mode), in a form every backend can compile.

    ``value`` is plain Python over float32 scalars ``(g, x, t, cof)`` that numba compiles; ``triton_op``
    selects the same formula in the Triton engine (kernels/backends/triton_loops.py).
    """

    name: str
    value: Callable[..., float]
    reads_input: bool
    triton_op: int
    live_buffers: int  # vector buffers one step keeps live: inputs read + the output
    # Arithmetic, not memory, bounds the formula on a core (KL's exp): backends that can trade
    # vector width for clock take the widest vectors (the CPU's 512-bit AVX-512 ones).
    compute_bound: bool = False
    # KL's logTarget formula: tuned and frozen apart from the plain one (its best config differs:
    # the exp makes it compute-bound), though both are one op and one kernel source.
    log_target: bool = False
    # The formula for a float16/bfloat16 output of an elementwise walk, where a cheaper one is
    # accurate enough: its float32 result is rounded once into 11 or 8 bits, so it need not carry
    # float32's 24 (KL log_target's exp: degree 3 for degree 7; a bfloat16 output takes coarse_value
    # instead where the backend offers it). None: ``value`` for every dtype.
    # Broadcast sums take it only where the gradient is one value: their terms add up in float32
    # first, and a sum that cancels keeps its terms' relative error; with one gradient KL
    # log_target's terms share its sign (backends.cpu.CpuBackend._loop_set).
    narrow_value: Callable[..., float] | None = None
    # narrow_value's twin for float16 outputs whose gradient is float16 too, where the bounds of
    # those values let a step cost less on hosts without it in one instruction (KL log_target's
    # scale by 2^k: one power of two for three, kernels/scalar.ldexp_half). The same bits as
    # narrow_value on every input. None: narrow_value.
    half_value: Callable[..., float] | None = None
    # value's and narrow_value's cheap twins for the loops of hosts where a step of theirs costs
    # several instructions (the contiguous loops and the walks' runs apart, and the reduce walk's
    # unit-stride lanes): each returns (its value, a flag) and equals its formula bit for
    # bit where the flag is False; the loop redoes a tile with the formula where any flag is True
    # (KL log_target's scale by 2^k: one power of two where k allows, kernels/scalar.ldexp_checked).
    # None: no twin.
    checked_value: Callable[..., tuple[float, bool]] | None = None
    narrow_checked_value: Callable[..., tuple[float, bool]] | None = None
    # The formula for a bfloat16 output of an elementwise walk where a backend offers it, cheaper
    # than narrow_value where 8 bits need less than float16's 11 (KL log_target's exp: degree 2 for
    # 3), and its checked twin; None: narrow_value's. Broadcast sums keep narrow_value: their terms'
    # errors add up before the one rounding.
    coarse_value: Callable[..., float] | None = None
    coarse_checked_value: Callable[..., tuple[float, bool]] | None = None
    # Where both twins' flags are never set, as a t interval for a cof: (lo, hi) in float32. The
    # contiguous twin pass over a 16-bit target may flag a tile from the target's raw patterns
    # against it (cpu_loops.RAW_FLAG) instead of element by element. None: no such interval.
    checked_range: Callable[[float], tuple[float, float]] | None = None
    # For a cof and a one-value gradient g, the least t from which the twins' values are zero or
    # normal float32 (not negative: none around 0): inside it and checked_range, a bfloat16 out of
    # a 16-bit target is stored by the host's own conversion with no per-element flag (cpu_loops'
    # raw flag pass with a 0-d gradient). None: every bfloat16 value is flagged where subnormal.
    normal_low: Callable[[float, float], float] | None = None
    # ``value(g, x, t, cof)`` is this form in float32, bit for bit (modes.FusedForm: KL without
    # logTarget's negated scale, mse's scaled difference): a backend may apply it to vectors of the
    # operands that it moves anyway, as the CPU's fused transposed walk does in its register
    # transposes. None: no such form.
    fused_form: FusedForm | None = None
    # An older op module's spelling of fused_form=NEGATED_SCALE (tuner.restamp loads old revisions
    # of the op modules beside today's): True sets fused_form to it.
    negated_scale: bool = False
    # The formula of a broadcast sum's terms (the reduce walks, every out dtype), where a cheaper one
    # is accurate enough: SEMANTICS holds such a sum to relative 1e-5 of the summed magnitudes, not
    # to float32's 4 ulp, so its terms need about 1e-6, not 24 bits (KL log_target's exp: degree 5
    # for degree 7). None: ``value``.
    sum_value: Callable[..., float] | None = None
    # sum_value's checked twin, as checked_value is value's: the reduce walk's unit-stride lanes sum
    # a block of terms by it, and again by sum_value where any flag was set. None: no twin.
    sum_checked_value: Callable[..., tuple[float, bool]] | None = None

    def __post_init__(self) -> None:
        if self.negated_scale and self.fused_form is None:
            object.__setattr__(self, "fused_form", FusedForm.NEGATED_SCALE)


def reduction_kind(reduction: Reduction) -> str:
    """Studies and frozen tables split elementwise (none) from reduced calls: autograd differs."""
    return "none" if reduction is Reduction.NONE else "reduced"


def size_bucket(numel: int) -> int:
    """Power-of-two bucket: the exponent of the next power of two at or above numel."""
    return max(0, math.ceil(math.log2(numel))) if numel > 0 else 0


@dataclass(frozen=True)
class ProblemKey:
    """What a tuned config is keyed by (besides backend and device)."""

    op: Op
    dtype: str
    bucket: int
    grad_kind: GradKind
    layout: Layout
    reduction_kind: str
    log_target: bool = False  # KL's logTarget formula (Formula.log_target); study names say "-log"

    def label(self) -> str:
        parts = (
            self.op.value,
            self.dtype,
            f"2^{self.bucket}",
            self.grad_kind.value,
            self.layout.value,
            self.reduction_kind,
        )
        return "-".join(parts)


@dataclass(frozen=True)
class Executor:
    """Phase one's result. ``workspace_size`` is 0: these ops need no device workspace."""

    op: Op
    formula: Formula
    backend: str
    device: str  # the device class the config table was looked up for
    config: Tiling
    # "explicit", "frozen <file> [<how>]", "default", or "default [<file> <how> streams]" (a streamed
    # guess not carried to a problem whose default does not stream: kernels.frozen._carried); <how>
    # may carry notes: "cores capped at N", "not streamed", "tile 4096 as the default", ...
    config_source: str
    space: Space
    key: ProblemKey
    geometry: Geometry
    cof: float
    grad: torch.Tensor = field(repr=False)
    inp: torch.Tensor = field(repr=False)
    target: torch.Tensor = field(repr=False)
    out: torch.Tensor = field(repr=False)
    workspace_size: int = 0
    # The backend's launch of this plan over any four tensors of its metadata, everything but their
    # addresses decided once (a backend's ``launcher``; dispatch.build sets it, dispatch.run calls
    # it): None where there is none, and the backend's ``launch`` reads the plan on every call.
    # Not an __init__ argument, so ``dataclasses.replace`` (a plan with another formula or config,
    # tuner.restamp) leaves it None instead of carrying a launch of the plan it came from;
    # ``bind`` and ``unbound`` keep it, as every field.
    launcher: Launcher | None = field(default=None, init=False, repr=False, compare=False)

    def bind(self, grad: Any, inp: Any, target: Any, out: Any) -> Executor:
        """This plan over other tensors with the same metadata: the plan cache's replay (kernels/dispatch.py).

        Gives the copy a new field dict instead of calling __init__: a frozen dataclass sets its 16
        fields one object.__setattr__ at a time, which alone was a third of a cached phase one.

        The dict is built anew and assigned whole. CPython 3.11 keeps a new instance's attributes
        inline; ``vars()`` turns them into a split dict, and loads from a split dict miss the
        specialised paths that inline values and combined dicts take (7 loads: 209 ns against 88-93,
        measured). ``vars(new).update(...)`` left every replayed plan so, and its launch took
        0.2-0.3 us more than a fresh plan's (results/performance.md, section 40). ``self`` turns
        into one too, so it should be a template (:meth:`unbound`), never an executor to launch.
        """
        new = object.__new__(Executor)
        fields = {**vars(self), "grad": grad, "inp": inp, "target": target, "out": out}
        object.__setattr__(new, "__dict__", fields)
        return new

    def unbound(self) -> Executor:
        """This plan without its tensors: the plan cache's template for :meth:`bind`.

        Reads each field instead of ``vars(self)``, which would leave ``self`` (the caller's
        executor) one of the slow kind that :meth:`bind` describes; and gives the template a
        combined dict, the kind ``bind`` copies fastest.
        """
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        # bind's construction written out, not a helper both call: that call cost every replay
        # 50-70 ns (measured).
        new = object.__new__(Executor)
        object.__setattr__(new, "__dict__", {**fields, "grad": None, "inp": None, "target": None, "out": None})
        return new

    @property
    def empty(self) -> bool:
        return self.geometry.numel == 0

    def __repr__(self) -> str:
        return (
            f"Executor({self.op.value} on {self.backend}/{self.device}: {self.key.label()}, "
            f"config [{self.config.short()}] from {self.config_source}, out {tuple(self.out.shape)} "
            f"{dtype_name(self.out.dtype)})"
        )
