"""Enums shared by every op: reduction, gradient kind, memory layout class and kernel variant."""

from __future__ import annotations

from enum import Enum, IntEnum

from kernels.errors import invalid


class Reduction(IntEnum):
    """aclnn reduction codes. BATCHMEAN is legal for KL divergence only."""

    NONE = 0
    MEAN = 1
    SUM = 2
    BATCHMEAN = 3

    @classmethod
    def parse(cls, value: object, *, allow_batchmean: bool, arg: str = "reduction") -> Reduction:
        """Accept the enum, its int or its lower-case name; anything else is 161002."""
        allowed = list(cls) if allow_batchmean else [cls.NONE, cls.MEAN, cls.SUM]
        expected = " or ".join(f"{int(r)}/'{r.name.lower()}'" for r in allowed)
        if isinstance(value, bool):
            raise invalid(arg, expected, repr(value))
        found: Reduction | None = None
        if isinstance(value, int):
            found = next((r for r in allowed if int(r) == value), None)
        elif isinstance(value, str):
            found = next((r for r in allowed if r.name.lower() == value.lower()), None)
        if found is None:
            raise invalid(arg, expected, repr(value))
        return found


class GradKind(str, Enum):
    """How the upstream gradient arrives: a full tensor, or one element (autograd's 0-d for mean/sum)."""

    FULL = "full"
    SCALAR = "scalar"


class Layout(str, Enum):
    """The memory pattern of a planned call; decides which variants are legal."""

    # every operand one run of memory in the same element order: contiguous, or one shared dense
    # layout (all transposed, all channels-last; plan.dense_in_memory_order)
    CONTIGUOUS = "contiguous"
    STRIDED = "strided"  # some operand broadcast or non-contiguous
    # 2-d, out unit-strided on the outer dim and the inputs on the inner one (transposed inputs,
    # contiguous out): a walk of its own on the CPU (cpu_loops.transposed), tuned apart.
    TRANSPOSED = "transposed"
    REDUCE = "reduce"  # KL only: input smaller than broadcast(input, target), summed back


class FusedForm(str, Enum):
    """A formula's value as one of a few float32 forms, bit for bit, that a backend may emit as vector
    code of its own instead of compiling the formula: the CPU's fused transposed walk applies it to
    the rows its register transposes load (kernels/backends/cpu_loops.py). Operations in the order
    written, each rounded to float32."""

    NEGATED_SCALE = "negated_scale"  # (-t * g) * cof, x unread: KL without logTarget
    SCALED_DIFFERENCE = "scaled_difference"  # ((x - t) * cof) * g: mse


class Variant(str, Enum):
    """Genuinely different kernels for the same op."""

    FLAT = "flat"  # 1-D contiguous loop, every operand read at i
    SCALAR_GRAD = "scalar_grad"  # the one-element gradient read once, not N times
    STRIDED = "strided"  # N-d strided/broadcast walk, no copies
    REDUCE = "reduce"  # KL: per output element, a fixed-order sum over the broadcast dims
    # 0-d gradient, 16-bit target, self unread: out = table[target bits], the formula's value at
    # all 2^16 targets built once per launch (CPU, KL log_target: a gather for each exp).
    TABLE = "table"


class Op(str, Enum):
    MSE = "mse"
    L1 = "l1"
    KL_DIV = "kl_div"
