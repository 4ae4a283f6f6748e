"""aclnnKlDivBackward.

Forward: ``loss = reduce(target * (log(target) - self))`` (or ``exp(target) * (target - self)`` with
logTarget). Backward, evaluated at B = broadcast(self, target)::

    out = (-target * gradOutput) * cof              logTarget false
    out = (-exp(target) * gradOutput) * cof         logTarget true
    cof = 1 (none, sum), 1 / numel(B) (mean), 1 / B[0] (batchmean; a 0-d B is an error)

No mask for target <= 0 (CANN and PyTorch since 1.13 agree); self's values are never read.
gradOutput must broadcast *to* B. out has self's shape and dtype: where B is larger than self,
the values are summed over the broadcast dims, in an order that does not depend on the tiling.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
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
    reduce_geometry,
)
from kernels.scalar import fma, frexp, horner, ldexp, ldexp_checked, ldexp_half
from kernels.tiling import Tiling


def _value(g: float, x: float, t: float, cof: float) -> float:
    return (-t * g) * cof


_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)  # ln2's high part: few enough bits that k * it is exact
_LN2_LO = np.float32(1.428606765330187e-06)
# One-step reduction for the 16-bit formula: r = t - k * float32(ln2) in one fma is off by at most
# 342 * 1.9e-9 = 6.5e-7, far under its polynomial's 1.03e-4 (1.04-1.06x less time, 2^21, A/B).
_LN2 = np.float32(0.6931471805599453)
_ROUND = np.float32(12582912.0)  # 1.5 * 2^23: adding and subtracting it rounds to an integer
_ROUND_BITS = _ROUND.view(np.int32)
# Past these the product is 0 (below) or +-inf (above) for every g and cof the op can have:
# exp(-194) * 2^128 < 2^-150, and exp(237) * 2^-149 * 2^-63 > 2^128 (cof = 1/numel >= 2^-63).
# The float32 exp alone over- and underflows far inside them (exp(88.8) is inf, exp(-104) is 0),
# which is why the scale by 2^k is the formula's last step, after g * cof.
_LO, _HI = np.float32(-194.0), np.float32(237.0)
# Where float64's exp(t) is 0 (from the float32 t = -745.13324 down, -inf included), so is p: the
# formula's 0 * g is then NaN for g = +-inf, as SEMANTICS' reference gives, and +-0 for finite g.
# One compare, which LLVM folds into the polynomial's last fma as a zeroing mask: with the scale
# moved last, 1.00-1.04x the time of the formula before (one thread, 2^21, in-process A/B).
_EXP64_ZERO = np.float32(-745.13324)
_ZERO = np.float32(0.0)

# exp(r) on |r| <= ln2/2, halved: the product's mantissa p/2 * g * m (m = cof's mantissa, in
# [0.5, 1)) stays under |g|, so it overflows only where the result does, and the 2 goes back into
# k's rounding constant. Halving a coefficient is exact.
_TAYLOR = tuple(np.float32(0.5 / math.factorial(i)) for i in range(8))  # degree 7: to ~1.5 ulp
# A degree-3 least-squares fit on 2000 Chebyshev nodes (numpy.polynomial.chebyshev.chebfit, then
# cheb2poly), rounded to float32, to relative 1.03e-4: float16's half ulp is at least 2^-12 =
# 2.4e-4 of a value (bfloat16's 2^-9), so one rounding of the result into 16 bits stays within
# 1 ulp; three fmas where the float32 exp has seven.
_NARROW = (0.9999244809150696, 0.9999622702598572, 0.5050235390663147, 0.16792160272598267)
_SHORT = tuple(np.float32(c / 2) for c in _NARROW)
# Degree 2, a relative minimax fit on |r| <= 0.35 (a little past ln2/2, as k's rounding allows;
# Lawson's reweighted least squares in float64), rounded to float32, to relative 1.78e-3
# (tests: test_narrow_exp). A bfloat16 value carries 8 bits: its ulp is over 2^-8 of the value, so
# 1.78e-3 of the value is under 0.46 ulp, and with the one rounding's half ulp a bfloat16 result
# stays within 0.96 ulp of the exact one. But not at the overflow threshold T = (2 - 2^-8) * 2^127:
# where the exact value lies within 1.78e-3 of T the result may round to inf where the reference's
# rounds to bfloat16's max, or the reverse (as within the narrow exp's 1.03e-4 of it; no exp short
# of a correctly rounded one avoids such a band; test_narrow_exp holds each exp to its own).
# Two fmas where the narrow exp has three: 0.89x its loop's time in C on the Zen 5 (one thread, in
# L1; results/performance.md, section 90). Not for float16, whose ulp is 2^-11 to 2^-10 of the
# value.
_COARSE = (1.0004607439041138, 1.0151509046554565, 0.4961816668510437)
_BRIEF = tuple(np.float32(c / 2) for c in _COARSE)
# Degree 5, fitted as _NARROW (weights 1/exp for a relative fit), rounded to float32: relative
# 1.5e-7 in float64, 2.0e-7 as float32 fmas evaluate it, and with the one-fma reduction's 6.5e-7 at
# |k| = 342, under 1e-6 of each term: a tenth of SEMANTICS' 1e-5 for a broadcast sum, which is what
# a term of one is held to. Two fmas fewer than the float32 exp and one in the reduction: the sums
# are bound by this arithmetic (results/performance.md, section 56).
_SUM = (
    1.0000001192092896,
    0.9999996423721313,
    0.49998900294303894,
    0.1666766256093979,
    0.04191502928733826,
    0.008291716687381268,
)
_SUM_HALVED = tuple(np.float32(c / 2) for c in _SUM)


def _log_value(
    coefficients: tuple[np.float32, ...], one_step: bool, scale: Callable[[float, int], float] = ldexp
) -> Callable[[float, float, float, float], float]:
    """``(-exp(t) * g) * cof`` with exp(t)'s polynomial ``coefficients`` (halved), as numba compiles it;
    ``one_step``: the reduction's ln2 in one float32 constant, where the polynomial is the coarser;
    ``scale``: the last step's ldexp, or ldexp_half where the result is a float16 and g one too (the
    checked twin, which returns (value, flag), is _log_twin's).

    exp(t) in float32 arithmetic, branch-free, the Triton source's algorithm: Cody-Waite reduction
    t = k ln2 + r (|r| <= ln2/2), a polynomial in r, then the scale by 2^k. A libm expf call per
    element kept the CPU loop scalar; straight-line code vectorises, and fma and ldexp are one
    instruction each where the host has them (kernels/scalar.py): the exp's operation count is what
    bounds this formula on the CPU, not memory (results/performance.md, section 12). The scale
    comes last, on p/2 * g * m, with cof's exponent added to k's: exp(t) alone overflows float32
    past t = 88.72, where SEMANTICS' float64 formula times a small g * cof is finite. The op count
    is exp-then-scale's: m and the exponent's offset are loop constants, and so is -g * m with a
    0-d gradient (LLVM hoists them). t is clamped for k only: t = +inf gives r = inf, so p = inf
    and g = 0 gives NaN, as the formula does. One departure: from t = 709.7827, where float64's exp
    overflows and the reference's inf * 0 is NaN, up to about 1.6e6, where p overflows, a g of 0
    gives -0, the formula's exact value (a select of inf there folds into no instruction: with the
    zero-select, the two took the float16 loops to 1.09-1.26x the time of neither; not worth it).
    NaN: max and min keep their first operand when the comparison fails (Python's rule, which numba
    compiles as a select), so a NaN t reaches every step; k's integer is read from j's bits, never
    converted (a float -> int conversion of NaN is undefined). Precision holds for |g| >= 2^-123;
    below that p/2 * g * m is subnormal and carries fewer bits than g.
    """

    def value(g: float, x: float, t: float, cof: float) -> float:
        tl = max(t, _LO)
        tc = min(tl, _HI)
        j = fma(tc, _LOG2E, _ROUND)  # round(tc / ln2) + 1.5 * 2^23: the integer sits in j's low bits
        k = j - _ROUND
        r = fma(-k, _LN2, tl) if one_step else fma(-k, _LN2_LO, fma(-k, _LN2_HI, tl))
        m, shift = frexp(cof)
        p = horner(r, coefficients)
        p = _ZERO if t <= _EXP64_ZERO else p  # NaN t: the comparison fails, p stays NaN
        s = p * (g * -m)
        return scale(s, np.float32(j).view(np.int32) - (_ROUND_BITS - 1 - shift))

    return value


def _log_twin(
    coefficients: tuple[np.float32, ...], one_step: bool
) -> Callable[[float, float, float, float], tuple[float, bool]]:
    """The checked twin of ``_log_value(coefficients, one_step)``: its value in one power of two
    (ldexp_checked) with a flag where that is not the formula's, and without the formula's clamp of
    t and its zero below -745.13324. Where the flag is False, k is in [-126, 127] and cof's exponent
    in [-62, 1] (cof in [2^-63, 1]), so t is within [-89, 131]: inside the clamp and above the zero,
    where neither changes a bit. Where t is past them (inf and NaN too), j's bits leave [2^23, 2^24)
    and k lies 2^22 or more outside: flagged, and the loops redo the tile with the formula. Three
    vector operations and three constants fewer in a loop whose constants outnumber AVX2's 16
    registers (results/performance.md, section 62)."""

    def value(g: float, x: float, t: float, cof: float) -> tuple[float, bool]:
        j = fma(t, _LOG2E, _ROUND)
        k = j - _ROUND
        r = fma(-k, _LN2, t) if one_step else fma(-k, _LN2_LO, fma(-k, _LN2_HI, t))
        m, shift = frexp(cof)
        s = horner(r, coefficients) * (g * -m)
        return ldexp_checked(s, np.float32(j).view(np.int32) - (_ROUND_BITS - 1 - shift))

    return value


def _twin_range(cof: float) -> tuple[float, float]:
    """The t interval where _log_twin's flag is never set, for this cof: its k is round(t * log2e)
    + 1 + shift (shift cof's frexp exponent), in [-126, 127] where the rounded product lies in
    [-127 - shift, 126 - shift]. Each end is a quarter inside its rounding boundary, so the
    float32 division's error (a few 1e-8 of the bound) cannot carry a t across: a t inside rounds
    to an integer k in range, whatever the twin's one-step or two-step reduction. Conservative by
    under 0.2 in t at each end (flagged tiles are redone by the formula, the same bits)."""
    m, shift = frexp(cof)
    hi = (np.float32(126.25) - np.float32(shift)) / _LOG2E
    lo = (np.float32(-127.25) - np.float32(shift)) / _LOG2E
    return np.float32(lo), np.float32(hi)


def _normal_low(cof: float, g: float) -> float:
    """The least t from which _log_twin's value for the one-value gradient g is +-0 or a normal
    float32, as far as the twin's own range (_twin_range) lets it be: there a bfloat16 out takes
    AVX512-BF16's vcvtneps2bf16 alone, which flushes a subnormal float32 to zero
    (cpu_loops._store_unfixed), with no flag a value. Not negative where no interval around 0
    holds: |g * cof| at most about 2^-124, and any subnormal g.

    The twin's value is s * 2^k, k = round(t * log2e) + 1 + shift, s = p/2 * (g * -m), with p/2 in
    [0.35, 0.71] (the narrow and the coarse exp alike) and m (cof's mantissa) in [0.5, 1):
    |s| >= 0.175 |g| >= 2^(eg - 3), eg = floor(log2 |g|) (each float32 rounding is monotonic and
    2^(eg - 3) representable). So |value| >= 2^-126 where round(t * log2e) >= -124 - eg - shift;
    the bound is a quarter of a k inside, as _twin_range's. A subnormal g counts as 2^-149. An inf
    or NaN g gives inf or NaN values and a zero g zeros, never subnormal ones: -inf."""
    bits = np.float32(g).view(np.int32) & 0x7FFFFFFF
    if bits == 0 or bits >= 0x7F800000:
        return np.float32(-np.inf)
    m, shift = frexp(cof)
    eg = (bits >> 23) - 127 if bits >= 0x00800000 else -149
    return np.float32((np.float32(-124.25) - np.float32(eg + shift)) / _LOG2E)


_value_log = _log_value(_TAYLOR, False)
# Formula.narrow_value: 16-bit outputs of elementwise walks (bfloat16 ones take coarse_value where
# the backend offers it); two float32 roundings of the product, far inside the 16-bit result's half
# ulp.
_value_log_narrow = _log_value(_SHORT, True)
# Formula.half_value: float16 outputs of elementwise walks whose gradient is float16 too. Then
# |p/2 * g * m| lies in [2^-27, 2^16] (|g| in [2^-24, 65504], p/2 in [0.35, 0.71], m in [0.5, 1)), or
# is 0, inf or NaN, so the float16 result of the scale by 2^k is the same for every k past
# [-126, 127] as at its end: ldexp_half, one power of two where ldexp takes three without AVX-512F.
# Same bits as the narrow formula on every input: both scales are exact where the float32 result is
# normal, and where it is not, both round to a float16 zero.
_value_log_half = _log_value(_SHORT, True, ldexp_half)
# Formula.checked_value and narrow_checked_value: the same in one power of two where k is in [-126,
# 127] (for a gradient and cof near 1, |t| up to ~87), with a flag where it is not; the contiguous
# loops of hosts without AVX-512F redo a flagged tile with the formulas above. The 15 vector
# operations of the three powers become 3, and the flag's compare and OR 3 more (_log_twin).
_value_log_checked = _log_twin(_TAYLOR, False)
_value_log_narrow_checked = _log_twin(_SHORT, True)
# Formula.coarse_value and coarse_checked_value: bfloat16 outputs of elementwise walks, where the
# backend offers them (backends.cpu: the Zen 5); the same steps with the degree-2 exp.
_value_log_coarse = _log_value(_BRIEF, True)
_value_log_coarse_checked = _log_twin(_BRIEF, True)
# Formula.sum_value: the terms of broadcast sums (but 16-bit outs of a one-value gradient, whose
# terms share one sign: the narrow formula), and its checked twin.
_value_log_sum = _log_value(_SUM_HALVED, True)
_value_log_sum_checked = _log_twin(_SUM_HALVED, True)


FORMULA = Formula("kl_div", _value, reads_input=False, triton_op=2, live_buffers=3, fused_form=FusedForm.NEGATED_SCALE)
FORMULA_LOG = Formula(
    "kl_div_log",
    _value_log,
    reads_input=False,
    triton_op=3,
    live_buffers=3,
    compute_bound=True,
    log_target=True,
    narrow_value=_value_log_narrow,
    half_value=_value_log_half,
    checked_value=_value_log_checked,
    narrow_checked_value=_value_log_narrow_checked,
    coarse_value=_value_log_coarse,
    coarse_checked_value=_value_log_coarse_checked,
    checked_range=_twin_range,
    normal_low=_normal_low,
    sum_value=_value_log_sum,
    sum_checked_value=_value_log_sum_checked,
)


def cof(reduction: Reduction, space: tuple[int, ...]) -> float:
    if reduction is Reduction.MEAN and math.prod(space) > 0:
        return 1.0 / math.prod(space)
    if reduction is Reduction.BATCHMEAN and space[0] > 0:
        return 1.0 / space[0]
    return 1.0


def reference(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object = "mean",
    log_target: bool = False,
) -> torch.Tensor:
    red = Reduction.parse(reduction, allow_batchmean=True)
    g, t = (v.detach().cpu().double() for v in (grad_output, target))
    space = tuple(torch.broadcast_shapes(input.shape, target.shape))
    value = (-(t.exp() if log_target else t) * g) * cof(red, space)
    return value.expand(space).sum_to_size(input.shape) if space != tuple(input.shape) else value.expand(space).clone()


def vendor_baseline(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object = "mean",
    log_target: bool = False,
) -> torch.Tensor:
    """torch_npu's aclnn op on NPU; elsewhere the eager expression autograd runs."""
    red = Reduction.parse(reduction, allow_batchmean=True)
    if input.device.type == "npu":
        return torch.ops.npu.kl_div_backward(grad_output, input, target, int(red), log_target)
    space = tuple(torch.broadcast_shapes(input.shape, target.shape))
    value = (-(target.exp() if log_target else target) * grad_output) * cof(red, space)
    return value.sum_to_size(input.shape) if space != tuple(input.shape) else value


def _call(reduction: object, log_target: object) -> tuple[object, ...]:
    """The plan cache's key for the non-tensor arguments (dispatch.plan_key)."""
    return (Op.KL_DIV, type(reduction), reduction, type(log_target), log_target)


def get_workspace_size(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object,
    log_target: bool,
    out: torch.Tensor | None,
    *,
    backend: str | None = None,
    config: Tiling | dict[str, object] | None = None,
    allocate: bool = False,
) -> tuple[int, Executor]:
    key = dispatch.plan_key(_call(reduction, log_target), grad_output, input, target, out, backend, config, allocate)
    cached = dispatch.replay(key, grad_output, input, target, out)
    if cached is not None:
        return cached.workspace_size, cached
    g = check_tensor("grad_output", grad_output)
    x = check_tensor("input", input)
    t = check_tensor("target", target)
    red = Reduction.parse(reduction, allow_batchmean=True)
    if not isinstance(log_target, bool):
        raise invalid("log_target", "a bool", repr(log_target))
    space = broadcast("input, target", tuple(x.shape), tuple(t.shape))
    if broadcast("grad_output, broadcast(input, target)", tuple(g.shape), space) != space:
        raise invalid("grad_output", f"a shape that broadcasts to {space}", tuple(g.shape))
    if red is Reduction.BATCHMEAN and not space:
        raise invalid("reduction", "none, mean or sum for a 0-d broadcast(input, target)", "batchmean")
    device = check_same_device({"grad_output": g, "input": x, "target": t})
    if out is None and allocate:
        out = torch.empty(x.shape, dtype=x.dtype, device=device)
    o = check_tensor("out", out)
    if o.dtype != x.dtype:
        raise invalid("out", f"dtype {dtype_name(x.dtype)} (input's)", dtype_name(o.dtype))
    if tuple(o.shape) != tuple(x.shape):
        raise invalid("out", f"shape {tuple(x.shape)} (input's)", tuple(o.shape))
    check_out_writable("out", o)
    check_same_device({"input": x, "out": o})
    # input's values are never read: target stands in for it, so its layout decides nothing.
    if space == tuple(x.shape):
        geometry = elementwise_geometry(g, t, t, o, space)
    else:
        geometry = reduce_geometry(g, t, t, o, space)
    formula = FORMULA_LOG if log_target else FORMULA
    ex = dispatch.build(Op.KL_DIV, formula, red, geometry, cof(red, space), (g, x, t, o), x.dtype, backend, config)
    dispatch.remember(key, ex)
    return ex.workspace_size, ex


def kl_div_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    target: torch.Tensor,
    reduction: object = "mean",
    log_target: bool = False,
    *,
    out: torch.Tensor | None = None,
    backend: str | None = None,
    config: Tiling | dict[str, object] | None = None,
) -> torch.Tensor:
    """Both phases; allocates ``out`` (input's shape and dtype) when it is not given."""
    key = dispatch.plan_key(_call(reduction, log_target), grad_output, input, target, out, backend, config, True)
    done = dispatch.run_cached(key, grad_output, input, target, out)
    if done is not None:
        return done
    _, ex = get_workspace_size(
        grad_output, input, target, reduction, log_target, out, backend=backend, config=config, allocate=True
    )
    dispatch.run(ex)
    return ex.out
