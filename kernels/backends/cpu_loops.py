"""numba loops of the CPU backend: one factory, specialised per op formula.

Every op is the same loop over an iteration space with a different scalar formula, so the loops
live here once and each op module supplies only ``value(g, x, t, cof) -> float32``.

numba has no float16, so 16-bit operands travel as their raw bits and are converted inside the
loop, element by element, never by an extra pass over the tensor. The numpy integer type names the
format, so numba compiles a separate specialisation per format with no branch in the loop:
``uint16`` carries bfloat16 bits and ``int16`` carries float16 bits.

``cores`` blocks each own a contiguous range (like an AI core's blockDim share); each block is
walked ``tile`` elements per step. The parallel build runs the blocks on numba's thread pool.

The loops take each operand as the address of its first element plus an empty "tag" array of its
element type, not as a numpy array: building four numpy views of torch tensors cost ~5 us per
launch, more than the whole kernel below 2^12 elements (results/performance.md); an address is
one ``data_ptr()`` call and numba types an int argument in a few nanoseconds.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import NamedTuple

import numba
import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import carray, njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic, overload

from kernels import scalar
from kernels.modes import FusedForm

_I32 = ir.IntType(32)

# No vectorised epilogue: after a loop's main vector body LLVM adds a second, narrower vector loop
# for the remainder, and the constants it hoists stay live across the main body, so the exp of KL
# log_target reloaded 12 of its constants from memory on every vector (movabsq + vbroadcastss):
# without it the main body keeps them in registers, 1.08x-1.19x on the float32/float16 exp loops
# (results/performance.md, section 15). A remainder is at most one vector less one element, done
# element by element with the same operations, so every result is bitwise the same. LLVM options
# are process-wide: other numba code in the process gets scalar remainders too.
llvm.set_option("", "-enable-epilogue-vectorization=false")
# The transposed walk's tile: 64 columns (the inputs' unit-stride dim) by as many rows as fill its
# buffer of out's element type (TRANSPOSED_TILES, below).
_TILE_COLS = 64
_F16_MAGIC = np.float32(2.0**112)  # rebias a float16 exponent (15) to float32's (127)


@njit(inline="always")
def _bits_to_f32(u: np.uint32) -> np.float32:
    return np.uint32(u).view(np.float32)


@intrinsic
def _bf16_to_f32(typingctx, b):
    """bfloat16 bits -> float32: the bits are float32's upper half. Written as LLVM IR on 32-bit lanes:
    numba widens uint32 arithmetic to 64 bits, which halves the vector width (16% on an mse loop)."""
    if b != types.uint16:
        return None

    def codegen(context, builder, signature, args):
        return _bf16_widen(builder, args[0])

    return types.float32(types.uint16), codegen


@njit(inline="always")
def _f16_to_f32(h: np.int16) -> np.float32:
    u = np.uint32(np.uint16(h))
    sign = (u & np.uint32(0x8000)) << np.uint32(16)
    em = u & np.uint32(0x7FFF)
    # Normals and subnormals: shift into float32 position, then one exact multiply fixes the bias.
    finite = np.float32(_bits_to_f32(em << np.uint32(13)) * _F16_MAGIC).view(np.uint32)
    special = np.uint32(0x7F800000) | ((em & np.uint32(0x3FF)) << np.uint32(13))
    # Branch-free select (all ones where inf/NaN), so the loop stays vectorisable.
    pick = np.uint32(0) - np.uint32(em >= np.uint32(0x7C00))
    return _bits_to_f32((special & pick) | (finite & ~pick) | sign)


@njit(inline="always")
def _select(pick: np.uint32, a: np.uint32, b: np.uint32) -> np.uint32:
    """a where ``pick`` is true, else b, without a branch (so LLVM keeps the loop vectorised)."""
    mask = np.uint32(0) - np.uint32(pick)
    return (a & mask) | (b & ~mask)


def target_cpu() -> str:
    """The CPU numba compiles for, as LLVM names it: ``NUMBA_CPU_NAME`` where set (numba's own
    cross-compilation switch, which tuner.restamp's ``--target`` sets), else the host's."""
    return numba.core.config.CPU_NAME or llvm.get_host_cpu_name()


def parse_features(text: str) -> dict[str, bool]:
    """LLVM's feature string, as ``NUMBA_CPU_FEATURES`` takes it ("+avx2,-avx512f"): each feature
    by name, on ("+") or off ("-"). tuner.restamp's targets are written in it too."""
    flags = (f.strip() for f in text.split(","))
    return {f[1:]: f[0] == "+" for f in flags if len(f) > 1 and f[0] in "+-"}


def target_features() -> dict[str, bool]:
    """The CPU features numba compiles for, read the way numba reads them: ``NUMBA_CPU_FEATURES``
    ("+avx2,-avx512f") where set, else the host's, less AVX under ``NUMBA_ENABLE_AVX=0``. Every
    feature gate of these loops (and the backend's device name) reads these, so the code paths
    always match the instructions LLVM may use: a cross-compile takes the target's paths, and
    never emits an intrinsic the target lacks."""
    config = numba.core.config
    if config.CPU_FEATURES is not None:
        return parse_features(config.CPU_FEATURES)
    features = dict(llvm.get_host_cpu_features())
    return {k: v and (config.ENABLE_AVX or not k.startswith("avx")) for k, v in features.items()}


def _forced(switch: str) -> bool | None:
    """The environment variable ``switch`` as a forced yes (1) or no (0), None where unset; any
    other value is refused by name. Each knob's host default applies where it is None."""
    forced = os.environ.get(switch)
    if forced not in (None, "0", "1"):
        raise ValueError(f"{switch}: expected 0 or 1, got {forced!r}")
    return None if forced is None else forced == "1"


def _host_has(feature: str, switch: str) -> bool:
    """Whether the CPU numba compiles for (target_features) has an LLVM CPU ``feature``; the
    environment variable ``switch`` set to 0 says no, so the portable build can be run and tested
    on any host."""
    if os.environ.get(switch, "1") == "0":
        return False
    return bool(target_features().get(feature, False))


class _BFloat(ir.types._BaseFloatType):
    """LLVM's ``bfloat``, which llvmlite's IR builder does not name (its float types' own base)."""

    null = "0.0"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"


_BFloat._create_instance()
# AVX512-BF16 (Zen 4, Sapphire Rapids): LLVM lowers ``fptrunc float to bfloat`` to one
# vcvtneps2bf16 per vector (_f32_to_bf16_hw), where _f32_to_bf16's rounding is eight operations
# and a vpmovdw. On a Zen 4 that took the bfloat16 exp loop to 1.41-1.43x float16's time at 2^24;
# with it, 1.01-1.02x (results/performance.md, section 34).
HAS_BF16 = _host_has("avx512bf16", "LOSSTUNE_CPU_BF16")


def _like(ty: ir.Type, element: ir.Type) -> ir.Type:
    """``element``, or a vector of it with as many lanes as ``ty`` where ``ty`` is a vector."""
    return ir.VectorType(element, ty.count) if isinstance(ty, ir.VectorType) else element


def _const(ty: ir.Type, v: int) -> ir.Constant:
    """The integer ``v`` as a constant of ``ty``: in every lane where ``ty`` is a vector."""
    return ir.Constant(ty, [v] * ty.count) if isinstance(ty, ir.VectorType) else ir.Constant(ty, v)


def _bf16_widen(builder: ir.IRBuilder, b: ir.Value) -> ir.Value:
    """_bf16_to_f32's IR, for bfloat16 bits or a vector of them (the fused walk's rows)."""
    i32 = _like(b.type, _I32)
    return builder.bitcast(builder.shl(builder.zext(b, i32), _const(i32, 16)), _like(b.type, ir.FloatType()))


def _bf16_round(builder: ir.IRBuilder, f: ir.Value) -> ir.Value:
    """_f32_to_bf16's IR, for a float or a vector of them (the fused walk's rows)."""
    i32 = _like(f.type, _I32)

    def c(v: int) -> ir.Constant:
        return _const(i32, v)

    u = builder.bitcast(f, i32)
    upper = builder.lshr(u, c(16))
    rounded = builder.lshr(builder.add(builder.add(u, c(0x7FFF)), builder.and_(upper, c(1))), c(16))
    nan = builder.fcmp_unordered("uno", f, f)  # one vcmpps into a mask register
    bits = builder.select(nan, builder.or_(upper, c(0x40)), rounded)
    return builder.trunc(bits, _like(f.type, ir.IntType(16)))


@intrinsic
def _f32_to_bf16(typingctx, f):
    """float32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN (sign, payload kept).
    32-bit integer IR for the reason given at _bf16_to_f32; a select, no branch."""
    if f != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return _bf16_round(builder, args[0])

    return types.uint16(types.float32), codegen


@intrinsic
def _f32_to_bf16_hw(typingctx, f):
    """LLVM's float -> bfloat (``fptrunc``): one vcvtneps2bf16 per vector with AVX512-BF16, the same
    bits as _f32_to_bf16 for every input, NaN included (tests/kernels/test_cpu_conversions.py).

    vcvtneps2bf16 treats subnormal inputs as zero. Those lanes (exponent field 0, zeros included)
    get 2^-126 with their sign added first: exact, into the binade [2^-126, 2^-125), whose bfloat16
    quantum is the subnormals' own 2^-133, so the one rounding is the same; taking 0x80 off the
    bits undoes the add. Only used where the host has AVX512-BF16: elsewhere LLVM would call a
    compiler-rt helper that numba's JIT does not link.
    """
    if f != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return _bf16_round_hw(builder, args[0])

    return types.uint16(types.float32), codegen


def _bf16_round_hw(builder: ir.IRBuilder, f: ir.Value) -> ir.Value:
    """_f32_to_bf16_hw's IR, for a float or a vector of them (the fused walk's rows)."""
    i32, i16 = _like(f.type, _I32), _like(f.type, ir.IntType(16))
    u = builder.bitcast(f, i32)
    tiny = builder.icmp_unsigned("==", builder.and_(u, _const(i32, 0x7F800000)), _const(i32, 0))
    lifted = builder.select(tiny, builder.add(u, _const(i32, 0x00800000)), u)
    bits = builder.bitcast(builder.fptrunc(builder.bitcast(lifted, f.type), _like(f.type, _BFloat())), i16)
    return builder.select(tiny, builder.sub(bits, _const(i16, 0x80)), bits)


_bf16_narrow = _f32_to_bf16_hw if HAS_BF16 else _f32_to_bf16


@intrinsic
def _f32_to_bf16_unfixed(typingctx, f):
    """LLVM's float -> bfloat alone: _f32_to_bf16_hw without its subnormal fix-up, so a nonzero
    subnormal float32 (which vcvtneps2bf16 flushes) comes out as a zero of its sign. Only for a
    store whose tile is redone where _f32_subnormal says so (_store_or_flag), or whose values are
    zero or normal wherever the tile is not redone (_store_unfixed, Formula.normal_low)."""
    if f != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], _BFloat()), ir.IntType(16))

    return types.uint16(types.float32), codegen


@intrinsic
def _f32_subnormal(typingctx, f):
    """f is a nonzero subnormal float32, as a bool: doubled bits (the sign shifted out) minus one,
    below 2^24 - 1 unsigned, which zeros (0 - 1 wraps) and normal numbers are not."""
    if f != types.float32:
        return None

    def codegen(context, builder, signature, args):
        doubled = builder.shl(builder.bitcast(args[0], _I32), ir.Constant(_I32, 1))
        below = builder.sub(doubled, ir.Constant(_I32, 1))
        return builder.icmp_unsigned("<", below, ir.Constant(_I32, 0x00FFFFFF))

    return types.boolean(types.float32), codegen


_TO_INF = np.float32(2.0**112)
_TO_ZERO = np.float32(2.0**-110)


@njit(inline="always")
def _f32_to_f16(f: np.float32) -> np.int16:
    """Round to nearest even, branch-free (M. Maratyszcza's FP16 library, fp16_ieee_from_fp32_value).

    Scaling |f| by 2^112 then 2^-110 lets the FPU do the rounding at float16's precision (overflow
    to inf included); adding a power of two aligned to f's exponent puts the rounded mantissa where
    a shift extracts it. The old branchy version kept numba from vectorising every 16-bit store.
    """
    w = np.float32(f).view(np.uint32)
    base = np.float32(np.float32(np.abs(np.float32(f)) * _TO_INF) * _TO_ZERO)
    shl1 = np.uint32(w + w)  # numba widens uint32 sums; the shift must drop the sign bit as in C
    sign = w & np.uint32(0x80000000)
    bias = max(shl1 & np.uint32(0xFF000000), np.uint32(0x71000000))
    base = np.float32(_bits_to_f32((bias >> np.uint32(1)) + np.uint32(0x07800000)) + base)
    bits = base.view(np.uint32)
    nonsign = ((bits >> np.uint32(13)) & np.uint32(0x7C00)) + (bits & np.uint32(0x0FFF))
    o = _select(shl1 > np.uint32(0xFF000000), np.uint32(0x7E00), nonsign)
    return np.int16(np.uint16((o | (sign >> np.uint32(16))) & np.uint32(0xFFFF)))


HAS_F16C = _host_has("f16c", "LOSSTUNE_CPU_F16C")  # vcvtph2ps / vcvtps2ph


@intrinsic
def _f16_to_f32_hw(typingctx, h):
    """LLVM's own half -> float (``fpext``): one vcvtph2ps per vector with F16C, exact."""
    if h != types.int16:
        return None

    def codegen(context, builder, signature, args):
        return builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())

    return types.float32(types.int16), codegen


@intrinsic
def _f32_to_f16_hw(typingctx, f):
    """LLVM's float -> half (``fptrunc``, round to nearest even): one vcvtps2ph per vector with F16C.

    Only used where the host has F16C: without it LLVM would call a compiler-rt helper that numba's
    JIT does not link.
    """
    if f != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))

    return types.int16(types.float32), codegen


_f16_widen = _f16_to_f32_hw if HAS_F16C else _f16_to_f32
_f16_narrow = _f32_to_f16_hw if HAS_F16C else _f32_to_f16


HAS_SCALEF = _host_has("avx512f", "LOSSTUNE_CPU_SCALEF")  # vscalefps: LLVM's lowering of a vector ldexp


@intrinsic
def _fmuladd(typingctx, a, b, c):
    """LLVM's ``fmuladd``: one vfmadd where the host has FMA, else a multiply and an add (never the
    libm ``fmaf`` call that ``llvm.fma`` becomes without FMA, which keeps a loop scalar)."""
    if not (a == b == c == types.float32):
        return None

    def codegen(context, builder, signature, args):
        f32 = ir.FloatType()
        fn = builder.module.declare_intrinsic("llvm.fmuladd", [f32], ir.FunctionType(f32, [f32] * 3))
        return builder.call(fn, args)

    return types.float32(types.float32, types.float32, types.float32), codegen


class Scale(StrEnum):
    """How a build multiplies by 2^k (``_make_ldexp``)."""

    SCALEF = "scalef"  # LLVM's ldexp: one vscalefps per vector with AVX-512F
    POWERS = "powers"  # three normal powers of two made from exponent bits, for k in [-378, 381]
    ONE_POWER = "one_power"  # one such power, k clamped into [-126, 127] (scalar.ldexp_half)
    NEAR = "near"  # one such power, k not clamped: exact in [-126, 127] (scalar.ldexp_checked)


def _make_ldexp(scale: Scale) -> Callable[..., float]:
    """x * 2^k for float32 x and an integer k (taken as int32), rounded once.

    ``Scale.SCALEF``: LLVM's ``ldexp``, one vscalefps per vector with AVX-512F, subnormal results
    exact; without AVX-512F that intrinsic is a libm call per element (the loop stays scalar, 12x
    slower), so ``Scale.POWERS`` multiplies by three powers of two made from exponent bits, k
    clamped into [-126, 127] twice and the rest: each a normal power, all of k's sign (so no step
    underflows or overflows unless the result does), for k in [-378, 381]; KL's exp scales by up to
    2^+-345 (kernels/ops/kl_div.py). A subnormal result may be rounded more than once: 1 subnormal
    ulp. ``Scale.ONE_POWER`` is the first of those steps alone, scalar.ldexp_half's meaning: a
    float16 result of an x in [2^-27, 2^16] needs no more (5 vector operations of the 15).
    ``Scale.NEAR``: that power without the clamp (3 operations), for k in [-126, 127] only: the
    caller flags the rest (``_scale_miss``) and redoes them with ``Scale.POWERS``.
    """

    @intrinsic
    def ldexp(typingctx, x, k):
        if x != types.float32 or not isinstance(k, types.Integer):
            return None

        def codegen(context, builder, signature, args):
            f32 = ir.FloatType()
            value, exp = args
            # numba widens int32 arithmetic to 64 bits; LLVM folds this truncation back into it.
            if k.bitwidth > 32:
                exp = builder.trunc(exp, _I32)
            elif k.bitwidth < 32:
                exp = (builder.sext if k.signed else builder.zext)(exp, _I32)
            if scale is Scale.SCALEF:
                fn = builder.module.declare_intrinsic("llvm.ldexp", [f32, _I32], ir.FunctionType(f32, [f32, _I32]))
                return builder.call(fn, [value, exp])

            def clamp(h: ir.Value) -> ir.Value:
                low = ir.Constant(_I32, -126)
                high = ir.Constant(_I32, 127)
                h = builder.select(builder.icmp_signed("<", h, low), low, h)
                return builder.select(builder.icmp_signed(">", h, high), high, h)

            def power(h: ir.Value) -> ir.Value:
                biased = builder.add(h, ir.Constant(_I32, 127))
                return builder.bitcast(builder.shl(biased, ir.Constant(_I32, 23)), f32)

            if scale is Scale.NEAR:
                return builder.fmul(value, power(exp))
            h1 = clamp(exp)
            if scale is Scale.ONE_POWER:
                return builder.fmul(value, power(h1))
            rest = builder.sub(exp, h1)
            h2 = clamp(rest)
            h3 = builder.sub(rest, h2)
            return builder.fmul(builder.fmul(builder.fmul(value, power(h1)), power(h2)), power(h3))

        return types.float32(types.float32, k), codegen

    return ldexp


_ldexp_scalef = _make_ldexp(Scale.SCALEF)
_ldexp_powers = _make_ldexp(Scale.POWERS)
_ldexp_one_power = _make_ldexp(Scale.ONE_POWER)
_ldexp_near = _make_ldexp(Scale.NEAR)
_ldexp = _ldexp_scalef if HAS_SCALEF else _ldexp_powers
# Where vscalefps is one instruction the half build is ldexp itself, so the backend gives a
# formula's half_value only to hosts without it (cpu.CpuBackend.kernels): elsewhere its loops
# would be the narrow ones again, compiled twice.
HALF_SCALE = not HAS_SCALEF
_ldexp_half = _ldexp_scalef if HAS_SCALEF else _ldexp_one_power
# CPUs with vscalefps where the checked twin's one power of two (a shift and a multiply, with its
# flag's add, compare and mask OR) still beats the formula's clamps of t, its zeroing compare and
# vcvtdq2ps + vscalefps: the Zen 5, whose float16 and bfloat16 exp loops took 0.89x and 0.88x the
# time with the twin (a C transcription, in L1) and 0.86-0.91x at 2^22 through the library
# (results/performance.md, section 68). Not measured on the Zen 4 or a Xeon: they keep vscalefps.
_CHECKED_CPUS = ("znver5",)


def _checked_scale() -> bool:
    """Whether the backend builds the checked contiguous loops (make_cpu_kernels' ``checked``):
    where ldexp is three powers of two (no AVX-512F), and on the CPUs of _CHECKED_CPUS. Elsewhere
    vscalefps is one instruction and the twin saves nothing. ``LOSSTUNE_CPU_CHECKED`` 1 or 0 says
    so on any host (the twin runs in the loops apart: see _tiles_apart)."""
    forced = _forced("LOSSTUNE_CPU_CHECKED")
    return (not HAS_SCALEF or target_cpu() in _CHECKED_CPUS) if forced is None else forced


CHECKED_SCALE = _checked_scale()


def _tiles_apart() -> bool:
    """Whether the contiguous loops of a compute-bound formula run each tile's element loop as a
    function of its own (make_cpu_kernels' ``apart``): where the host has 16 vector registers (no
    AVX-512F). Inlined into the walk over blocks and tiles, KL log_target's exp kept its constants
    in none of them: LLVM hoists them out of every loop, the tile loop's scalar remainder holds
    scalar copies of them beside the vector ones, and under numba's large code model each reload in
    the vector loop is a ``movabsq`` and a ``vbroadcastss``. On its own the loop holds them in
    registers: 1.7x less time per element on the Zen 3 (results/performance.md, section 62). Also
    wherever the checked twin is built (CHECKED_SCALE), as it runs only in the loops apart.
    ``LOSSTUNE_CPU_APART`` 1 or 0 says so on any host (its tests build both)."""
    forced = _forced("LOSSTUNE_CPU_APART")
    return (not HAS_SCALEF or CHECKED_SCALE) if forced is None else forced


TILES_APART = _tiles_apart()


# CPUs where the contiguous twin pass flags a 16-bit target's tile from the target's raw patterns
# (make_cpu_kernels' ``checked_range``): the Zen 5, whose float16 twin took 0.87x the time in a C
# transcription (1.39 ns per 16 elements in L1 against 1.61 with the per-element flag; 1.31 with no
# flag at all) and 0.89x at 2^22 through the library, float16 0-d (results/performance.md, section
# 70). Not measured on the AVX2 hosts, the other place the twin runs: they keep the per-element flag.
_RAW_FLAG_CPUS = ("znver5",)


def _raw_flag() -> bool:
    """Whether a contiguous twin pass over a 16-bit target flags its tile from the target's raw
    patterns instead of from each element's k: a running max of the patterns as unsigned and as
    signed 16-bit integers (vpmaxuw, vpmaxsw: the most negative and the largest t), compared once a
    tile with the patterns of the formula's range (Formula.checked_range). On the CPUs of
    _RAW_FLAG_CPUS; ``LOSSTUNE_CPU_RAW_FLAG`` 1 or 0 says so on any host (it matters only where
    the twin is built: CHECKED_SCALE)."""
    forced = _forced("LOSSTUNE_CPU_RAW_FLAG")
    return target_cpu() in _RAW_FLAG_CPUS if forced is None else forced


RAW_FLAG = _raw_flag()


def _half_limits(t, lo, hi):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


@overload(_half_limits)
def _half_limits_impl(t, lo, hi):
    """The patterns of t's dtype inside the float32 interval [lo, hi] (lo < 0 < hi, both normal in
    that dtype): (the largest unsigned pattern of a t >= lo, the largest signed one of a t <= hi).
    A t whose pattern is above the first as unsigned is negative and below lo (or a negative NaN or
    -inf); above the second as signed, positive and above hi (or NaN, +inf). Each bound is rounded
    to the dtype and stepped one pattern inward where that rounding went outward. A float32 t has
    no such patterns: the limits let everything through, and the per-element flag stays (_bad_of)."""
    if t.dtype == types.int16:
        widen, narrow = _f16_widen, _f16_narrow

        def f16_limits(t, lo, hi):
            p = narrow(hi)
            if widen(p) > hi:
                p = np.int16(p - np.int16(1))
            q = narrow(lo)
            if widen(q) < lo:
                q = np.int16(q - np.int16(1))
            return np.uint16(q), np.int16(p)

        return f16_limits
    if t.dtype == types.uint16:
        narrow_bf = _bf16_narrow

        def bf16_limits(t, lo, hi):
            p = narrow_bf(hi)
            if _bf16_to_f32(p) > hi:
                p = np.uint16(p - np.uint16(1))
            q = narrow_bf(lo)
            if _bf16_to_f32(q) < lo:
                q = np.uint16(q - np.uint16(1))
            return np.uint16(q), np.int16(p)

        return bf16_limits
    return lambda t, lo, hi: (np.uint16(0xFFFF), np.int16(0x7FFF))


def _track(t, i, hu, hs):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


@overload(_track)
def _track_impl(t, i, hu, hs):
    """The running maxima of a 16-bit t's patterns, as unsigned and as signed (_half_limits);
    unchanged for a float32 t."""
    if t.dtype in (types.int16, types.uint16):
        return lambda t, i, hu, hs: (max(hu, np.uint16(t[i])), max(hs, np.int16(t[i])))
    return lambda t, i, hu, hs: (hu, hs)


def _bad_of(t, bad):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


def _sixteen(a):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


@overload(_sixteen)
def _sixteen_impl(a):
    """Whether ``a`` holds a 16-bit float (its int16/uint16 view): a constant of its type, which
    LLVM folds, where ``a.itemsize`` is read from the array at run time."""
    sixteen = a.dtype in (types.int16, types.uint16)
    return lambda a: sixteen


@overload(_bad_of)
def _bad_of_impl(t, bad):
    """An element's own flag where the raw patterns cannot stand for it (a float32 t); False for a
    16-bit t, whose tile flag is the patterns' (LLVM then drops the per-element compare)."""
    if t.dtype in (types.int16, types.uint16):
        return lambda t, bad: False
    return lambda t, bad: bad


@intrinsic
def _scale_miss(typingctx, k):
    """k outside [-126, 127], as a bool: one add and one unsigned compare on k's int32."""
    if not isinstance(k, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        (exp,) = args
        if k.bitwidth > 32:
            exp = builder.trunc(exp, _I32)
        elif k.bitwidth < 32:
            exp = (builder.sext if k.signed else builder.zext)(exp, _I32)
        biased = builder.add(exp, ir.Constant(_I32, 126))
        return builder.icmp_unsigned(">", biased, ir.Constant(_I32, 253))

    return types.boolean(k), codegen


@overload(scalar.fma)
def _fma_impl(a, b, c):
    return lambda a, b, c: _fmuladd(a, b, c)


@overload(scalar.ldexp)
def _ldexp_impl(x, k):
    return lambda x, k: _ldexp(x, k)


@overload(scalar.ldexp_half)
def _ldexp_half_impl(x, k):
    return lambda x, k: _ldexp_half(x, k)


@overload(scalar.ldexp_checked)
def _ldexp_checked_impl(x, k):
    return lambda x, k: (_ldexp_near(x, k), _scale_miss(k))


@overload(scalar.frexp)
def _frexp_impl(x):
    if x != types.float32:
        return None

    def frexp(x):
        # x's sign and mantissa under the exponent of 0.5, and x's exponent less 0.5's: normal x only.
        b = np.float32(x).view(np.uint32)
        m = np.uint32((b & np.uint32(0x807FFFFF)) | np.uint32(0x3F000000)).view(np.float32)
        return m, np.int32((b >> np.uint32(23)) & np.uint32(0xFF)) - np.int32(126)

    return frexp


@overload(scalar.horner)
def _horner_impl(x, coefficients):
    if not isinstance(coefficients, types.UniTuple) or coefficients.count < 1:
        return None
    # Unrolled for this length: a loop over the tuple would be one LLVM must unroll before it can
    # vectorise the element loop around it.
    n = coefficients.count
    lines = [f"    a = coefficients[{n - 1}]"] + [
        f"    a = _fmuladd(a, x, coefficients[{i}])" for i in range(n - 2, -1, -1)
    ]
    code = "def horner(x, coefficients):\n" + "\n".join(lines) + "\n    return a\n"
    namespace: dict[str, object] = {"_fmuladd": _fmuladd}
    exec(code, namespace)  # noqa: S102 - source built above from an integer, no outside text
    return namespace["horner"]


@intrinsic
def _pointer(typingctx, address, tag):
    """``address`` (an int from ``Tensor.data_ptr()``) as a pointer to ``tag``'s element type."""
    if not isinstance(address, types.Integer) or not isinstance(tag, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return types.CPointer(tag.dtype)(address, tag), codegen


@intrinsic
def _apart(typingctx, fn, args):
    """``fn(*args)`` for a jitted ``fn``, as a call LLVM never inlines (the call site is marked
    ``noinline``): fn's loop keeps a register allocation of its own (TILES_APART). fn must not
    raise; its status is not read."""
    if not isinstance(fn, types.Dispatcher) or not isinstance(args, types.BaseTuple):
        return None
    inner = typingctx.resolve_function_type(fn, tuple(args.types), {})
    if inner is None:
        return None

    def codegen(context, builder, signature, llargs):
        result = fn.dispatcher.get_compile_result(inner)
        context.add_linking_libs([result.library])
        values = cgutils.unpack_tuple(builder, llargs[1], len(args))
        callee = context.declare_function(builder.module, result.fndesc)
        call = context.call_conv.call_function
        _, value = call(builder, callee, inner.return_type, inner.args, values, attrs=("noinline",))
        return value

    return inner.return_type(fn, args), codegen


@njit(inline="always")
def _view(address, n, tag):
    """A 1-D array over ``n`` elements at ``address``; the tensor that owns them outlives the call."""
    return carray(_pointer(address, tag), n)


@njit(inline="always")
def _block_share(n, nblocks):
    """The elements each block of a contiguous walk owns (flat, scalar_grad, the table walk): an
    even share rounded up to 32 elements, so every block but the last starts on a line boundary
    of out whatever its element width."""
    return ((n + nblocks - 1) // nblocks + 31) // 32 * 32


_LANE_BYTES = 16  # x86's unpack instructions (vpunpckl/h*) interleave within each 128-bit lane


def _unpack_rounds(n: int, lane: int) -> list[tuple[int, list[int], list[int]]]:
    """The shuffle masks of an n x n transpose in log2(n) rounds of two-source shuffles (the
    unpack sequence): round u interleaves u-element units of two vectors, low halves then high.
    Below ``lane`` elements (one 128-bit lane) the halves are those of each lane, as vpunpckl/h*
    take them: one instruction each on port 5, where a whole-vector interleave of 16-bit units is
    vpermt2w, three (results/performance.md, section 17). The columns then leave in another slot
    order, which _column_slots works out."""
    rounds, u = [], 1
    while u < n:
        span = lane if u < lane else n  # the halves interleaved: of each lane, or of the vector
        half = span // 2
        lo: list[int] = []
        hi: list[int] = []
        for base in range(0, n, span):
            for k in range(0, half, u):
                for mask, first in ((lo, base + k), (hi, base + half + k)):
                    mask += [*range(first, first + u), *range(n + first, n + first + u)]
        rounds.append((u, lo, hi))
        u *= 2
    return rounds


def _run_rounds(vecs: list, lane: int, shuffle: Callable[[object, object, list[int]], object]) -> list:
    """The rounds over n vectors: round u pairs vector i with vector i + u inside each group of 2u
    and writes the low then the high interleave into slots 2i and 2i + 1 of the group."""
    n = len(vecs)
    for step, lo, hi in _unpack_rounds(n, lane):
        out = list(vecs)
        for group in range(0, n, 2 * step):
            for i in range(group, group + step):
                first = group + 2 * (i - group)
                out[first] = shuffle(vecs[i], vecs[i + step], lo)
                out[first + 1] = shuffle(vecs[i], vecs[i + step], hi)
        vecs = out
    return vecs


@cache
def _column_slots(n: int, lane: int) -> tuple[int, ...]:
    """Column j of the transpose is left in slot _column_slots(n, lane)[j]: the rounds run on
    (row, column) labels, and each slot must hold one whole column in row order."""
    labels = [[(r, c) for c in range(n)] for r in range(n)]
    slots = _run_rounds(labels, lane, lambda a, b, mask: [(a + b)[m] for m in mask])
    where = {}
    for slot, column in enumerate(slots):
        assert [r for r, _ in column] == list(range(n)) and len({c for _, c in column}) == 1, column
        where[column[0][1]] = slot
    return tuple(where[j] for j in range(n))


def _transpose_lanes(builder: ir.IRBuilder, rows: list[ir.Value], lane: int, halves: bool = False) -> list[ir.Value]:
    """n n-lane vectors (rows) -> their n columns, column j at index j. LLVM lowers each shuffle
    to one instruction (vpunpck* inside lanes, vshufi64x2 / vinserti* / vpermt2q across them).

    ``halves``: n 2n-lane vectors, each row i of two stacked n x n blocks side by side -> their n
    columns, column j of both blocks side by side at index j (one whole line of out for half-line
    rows): the same rounds on both halves at once, each mask mapped onto both, so one shuffle
    serves where two stacked blocks take two (LLVM: vpunpck* on zmm inside lanes, vpermt2q across
    them)."""
    n = len(rows)

    def both(mask: list[int]) -> list[int]:  # an n-lane mask over (a, b), on each half of (a, b)
        return [h * n + k if k < n else 2 * n + h * n + k - n for h in (0, 1) for k in mask]

    def shuffle(a: ir.Value, b: ir.Value, mask: list[int]) -> ir.Value:
        lanes = both(mask) if halves else mask
        return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_I32, len(lanes)), lanes))

    slots = _run_rounds(rows, lane, shuffle)
    return [slots[s] for s in _column_slots(n, lane)]


LINE = 64  # bytes per cache line: a block column is stored as one whole line


def _raw_pair(src: types.Type, dst: types.Type) -> bool:
    """Whether an intrinsic that moves raw bits takes these two: arrays of one 16- or 32-bit type."""
    return (
        isinstance(src, types.Array)
        and isinstance(dst, types.Array)
        and src.dtype == dst.dtype
        and src.dtype.bitwidth in (16, 32)
    )


def _lanes_at(context, builder: ir.IRBuilder, array_type: types.Array, array: ir.Value, offset: ir.Value, vec):
    """A pointer to ``vec``'s lanes from element ``offset`` of a numba array."""
    data = context.make_array(array_type)(context, builder, array).data
    element = builder.gep(builder.bitcast(data, vec.element.as_pointer()), [offset])
    return builder.bitcast(element, vec.as_pointer())


def _nontemporal(builder: ir.IRBuilder, store: ir.Instruction) -> None:
    """Marks a vector store non-temporal (vmovntdq): the line goes to memory without being read in."""
    store.set_metadata("nontemporal", builder.module.add_metadata([ir.Constant(_I32, 1)]))


def vector_bytes() -> int:
    """The bytes of the widest vector register the CPU numba compiles for has: a whole line (a zmm)
    with AVX-512F, half a line (a ymm) without. A build that asks for a register wider than this
    stops LLVM itself (the fused walk's pinned rows: "couldn't allocate output register for
    constraint 'v'"), so each such build checks against it first."""
    return LINE if target_features().get("avx512f", False) else LINE // 2


def _transpose_bytes() -> int:
    """The bytes of one register-transpose row: a whole line (one zmm) with AVX-512, half a line
    (one ymm) without. A line-wide transpose on AVX2 is split by LLVM into ymm halves, 2 x 16 of
    them for a 16 x 16 float32 block where the ISA has 16 registers; with half-line blocks the
    transposed walk's time over the contiguous loop's fell 1.01-1.67x on the AVX2 host measured
    (results/performance.md, section 30).
    ``LOSSTUNE_CPU_TRANSPOSE_BYTES`` (64 or 32) picks one on any host, so both walks are tested
    everywhere."""
    forced = os.environ.get("LOSSTUNE_CPU_TRANSPOSE_BYTES")
    if forced is None:
        return vector_bytes()
    if forced not in (str(LINE), str(LINE // 2)):
        raise ValueError(f"LOSSTUNE_CPU_TRANSPOSE_BYTES: expected {LINE} or {LINE // 2}, got {forced!r}")
    return int(forced)


TRANSPOSE_BYTES = _transpose_bytes()
# The transposed walk's tiles, in 4-byte words of its out buffer: 4096 (tiling.CPU_TRANSPOSED_TILE)
# is 16 KiB, 64 rows of float32 or 128 of a 16-bit type by 64 columns. With AVX-512 that one tile,
# the Xeon's best (sections 17 and 23: taller tiles no better there); with 32-byte rows also 64 and
# 128 KiB buffers (in L2), 0.98-1.41x as fast as 16 KiB on the AVX2 host's 16-bit rows (medians
# 1.06-1.14) and 0.83-1.14x on its float32 ones (section 31), so the tuner picks per bucket.
TRANSPOSED_TILES = (4096,) if TRANSPOSE_BYTES == LINE else (4096, 16384, 32768)
# CPUs that run each 512-bit operation as two 256-bit halves (AMD Zen 4; Intel's AVX-512 cores and
# Zen 5 have whole 512-bit datapaths). There a zmm shuffle costs two ymm ones, and the 16-bit
# 32 x 32 transposes (5 rounds of 32 zmm shuffles per 1024 elements, spilling: 64 live rows in 32
# registers) lost to stacked 16 x 16 ones in ymm (4 rounds of 16 per 256, no spills): the
# transposed walk over the contiguous loop at 2^22 went from 2.09-2.33 to 1.65-1.74 (mse bfloat16
# 0-d) and from 1.84-1.85 to 1.58-1.71 (l1 float16 full), while some float32 rows lost (kl_div-log
# full 1.41 -> 1.62): a knob, not a rule (results/performance.md, section 36).
_SPLIT_512 = ("znver4",)
# CPUs offered the three walk knobs found on the Zen 4 (half rows, inputs first, deferred stores):
# _SPLIT_512's, and the Zen 5, whose 512-bit operations are whole but whose 16-bit transposed rows
# at 2^22 took 0.76-1.04x the time with the knobs a study froze (most 0.91-0.96x; kl_div float16
# 0-d 0.76x; results/performance.md, sections 64 and 65), and the Intel Xeon (LLVM's rocketlake),
# where 10 of the 16-bit transposed rows at 2^22 took 0.75-0.91x the time of the AVX-512 tier's
# configs with half rows and deferred stores (kl_div-log bfloat16 0-d 0.75x, l1 bfloat16 0.82x) and
# mse's four tied (0.99-1.04x; section 96). The tuner decides per bucket, so a float32 row the
# knobs lose keeps its old config.
_WALK_KNOB_CPUS = (*_SPLIT_512, "znver5", "rocketlake")


def _on_knob_cpu(switch: str) -> bool:
    """Whether a walk offered on the CPUs of _WALK_KNOB_CPUS is offered here: the environment
    variable ``switch`` 1 offers it on any host, 0 on none, unset leaves it to the CPU and its tier.
    The knobs were measured with AVX-512 alone, so one of those CPUs whose AVX-512 a hypervisor
    hides (a Zen 4 VM with AVX2 only) keeps the AVX2 tier's spaces, those its table was tuned on."""
    forced = _forced(switch)
    if forced is not None:
        return forced
    return target_cpu() in _WALK_KNOB_CPUS and target_features().get("avx512f", False)


def _transpose_rows() -> tuple[int, ...]:
    """The register rows a transposed-walk config may take (Tiling.transpose_row), in bytes: 0, the
    host's (TRANSPOSE_BYTES), everywhere; also half a line where the host's rows are whole lines
    and its CPU is offered the walk knobs (_WALK_KNOB_CPUS). ``LOSSTUNE_CPU_HALF_ROWS`` 1 offers half
    rows on any whole-line host (to measure a CPU the list lacks), 0 on none."""
    offered = _on_knob_cpu("LOSSTUNE_CPU_HALF_ROWS")
    return (0, LINE // 2) if TRANSPOSE_BYTES == LINE and offered else (0,)


TRANSPOSE_ROWS = _transpose_rows()


def _inputs_first() -> bool:
    """Whether the transposed walk offers its inputs-first order (Tiling.transpose_in) where a
    formula reads the target alone with a 0-d gradient: on the CPUs of _WALK_KNOB_CPUS (Zen 4,
    where it took 0.79-0.87x the time of the shipped order's best config on five of the six such
    rows at 2^22, and 1.18x on kl_div float32; results/performance.md section 42).
    ``LOSSTUNE_CPU_INPUTS_FIRST`` 1 offers it on any host, 0 on none. Elsewhere the spaces, and
    the hashes their tables' entries carry, stay as they were."""
    return _on_knob_cpu("LOSSTUNE_CPU_INPUTS_FIRST")


INPUTS_FIRST = _inputs_first()


def _deferred() -> bool:
    """Whether the transposed walk offers deferring out's stores (Tiling.defer_out) for a 16-bit
    out: on the CPUs of _WALK_KNOB_CPUS (Zen 4, where streamed half rows took 0.78-0.96x the time
    of the shipped walk's same config on the 16-bit rows at 2^22, and float32 lost, 1.04-1.37x;
    results/performance.md section 43). ``LOSSTUNE_CPU_DEFERRED`` 1 offers it on any host, 0 on
    none. Elsewhere the spaces, and the hashes their tables' entries carry, stay as they were."""
    return _on_knob_cpu("LOSSTUNE_CPU_DEFERRED")


DEFERRED = _deferred()


def _row_bytes(row: int) -> int:
    """A config's transpose_row in bytes: 0 is the host's own row."""
    return row or TRANSPOSE_BYTES


def _block(width: int, row_bytes: int) -> int:
    """The side of one register transpose: one row of ``row_bytes``. With whole-line rows every
    output column leaves as one whole line. The columns of a block all map to one cache set (out's
    row stride is a large power of two), which cannot hold them until a later block completes a
    line stored in parts. One 512-bit vector per row: a 32 x 32 transpose of 16-bit lanes takes 5
    rounds of 32 one-instruction shuffles, where two stacked 16 x 16 ones in 256-bit vectors took 4
    rounds of 2 x 16 plus 16 to join the halves on the AVX-512 host (results/performance.md,
    section 17). With half-line rows (AVX2, or Zen 4's pick) two stacked blocks fill each output
    line."""
    return row_bytes // width


def _store_order(blocks: int, n: int, row_bytes: int) -> list[tuple[int, int]]:
    """(block, column) of each column store of ``blocks`` stacked n x n transposes, in order.

    Whole-line rows: ``blocks`` rounds, round q storing column j of block (q + j) % blocks. Out's
    columns are a power of two apart, so one block's n lines share their low address bits; on the
    AVX-512 host n stores in a row that all land on even (or all on odd) lines ran 1.16-1.36x
    slower than ones that alternate (results/performance.md, section 23); with two blocks each
    round alternates. Half-line rows: column by column, each column's blocks in turn, so the two
    halves of an output line are stored one after the other. Stored a round apart, with n other
    lines' halves between them, the AVX2 host ran the walk 1.1-2.0x slower (section 30): a
    streamed line left half-written is flushed in parts."""
    if row_bytes == LINE:
        return [((q + j) % blocks, j) for q in range(blocks) for j in range(n)]
    return [(b, j) for j in range(n) for b in range(blocks)]


def _make_transpose(stream: bool, blocks: int, row_bytes: int) -> Callable[..., None]:
    """The register transpose of ``blocks`` blocks stacked in src, rows of ``row_bytes``
    (_transpose_typer); ``stream``: its column stores are non-temporal (vmovntdq), each a whole
    aligned row that goes to memory without first reading its line in (no read-for-ownership).
    The caller guarantees the alignment: a misaligned non-temporal store faults."""

    @intrinsic
    def transpose(typingctx, src, s0, ss, dst, d0, ds):
        return _transpose_typer(src, s0, ss, dst, d0, ds, stream, blocks, row_bytes)

    return transpose


def _transpose_typer(src, s0, ss, dst, d0, ds, stream: bool, blocks: int, row_bytes: int):
    """dst[d0 + j * ds + i] = src[s0 + i * ss + j] for i < blocks * n and j < n = _block(width, row_bytes):
    per block n vector loads, n log2(n) shuffles and n vector stores, where element-wise it is n^2
    scalar loads and stores. Block b fills elements b * n to (b + 1) * n of each of the n columns
    in dst: line b of each with whole-line rows, half of line b // 2 with half-line rows.

    The stores go in _store_order. src and dst hold the same element type, moved as raw bits."""
    if not _raw_pair(src, dst):
        return None

    def codegen(context, builder, signature, args):
        width = src.dtype.bitwidth // 8
        n = _block(width, row_bytes)
        lane = ir.IntType(8 * width)
        vec = ir.VectorType(lane, n)
        # The rows' vectors legal in this function whatever its preferred width (clang marks its
        # AVX-512 intrinsics' callers the same way).
        set.add(builder.function.attributes, f'"min-legal-vector-width"="{8 * row_bytes}"')
        s0_, ss_ = args[1], args[2]
        columns = []
        for b in range(blocks):
            rows = [
                builder.load(
                    _lanes_at(context, builder, src, args[0], _index(builder, s0_, ss_, b * n + i), vec), align=width
                )
                for i in range(n)
            ]
            columns.append(_transpose_lanes(builder, rows, _LANE_BYTES // width))
        _store_columns(context, builder, dst, args[3:6], columns, row_bytes, stream)
        return context.get_dummy_value()

    return types.none(src, s0, ss, dst, d0, ds), codegen


def _index(builder: ir.IRBuilder, base: ir.Value, stride: ir.Value, k: int, plus: int = 0) -> ir.Value:
    """base + k * stride + plus: row k's element ``plus`` of a transpose's operand."""
    return builder.add(
        builder.add(base, builder.mul(stride, ir.Constant(stride.type, k))), ir.Constant(base.type, plus)
    )


def _store_columns(
    context,
    builder: ir.IRBuilder,
    dst_type,
    dst_args,
    columns: list,
    row_bytes: int,
    stream: bool,
    value: Callable[[ir.Value], ir.Value] | None = None,
):
    """The columns of stacked transposed blocks (``columns[b][j]``: column j of block b, each an n-lane
    vector; or of one paired block, both blocks' column j side by side in 2n lanes, ``row_bytes`` a
    whole line) into dst (``dst_args``: the array, d0, ds), column j of block b at d0 + j * ds + b * n, in
    _store_order: non-temporal and row-aligned where ``stream``. ``value``: each column's
    transform, emitted just before its store (the fused walk's formula on a raw column)."""
    dst, d0, ds = dst_args
    width = dst_type.dtype.bitwidth // 8
    n = len(columns[0])
    for b, j in _store_order(len(columns), n, row_bytes):
        column = columns[b][j] if value is None else value(columns[b][j])
        at = _lanes_at(context, builder, dst_type, dst, _index(builder, d0, ds, j, b * n), column.type)
        if stream:
            _nontemporal(builder, builder.store(column, at, align=row_bytes))
        else:
            builder.store(column, at, align=width)


class _Transposes(NamedTuple):
    """The register transposes of one row width: one block or two stacked, ordinary or streamed
    stores. Two blocks, one on top of the other: more would not fit the 32 vector registers (four
    measured slower than two, section 23)."""

    block: Callable[..., None]
    block_nt: Callable[..., None]
    pair: Callable[..., None]
    pair_nt: Callable[..., None]


_TRANSPOSES = {
    row: _Transposes(*(_make_transpose(nt, blocks, _row_bytes(row)) for blocks in (1, 2) for nt in (False, True)))
    for row in TRANSPOSE_ROWS
}


@intrinsic
def _sfence(typingctx):
    """Orders this thread's non-temporal stores before whatever it does next (they are weakly
    ordered: without it another thread could read out before the streamed lines land)."""

    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.x86.sse.sfence", (), ir.FunctionType(ir.VoidType(), []))
        builder.call(fn, [])
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def _stream_line(typingctx, src, s0, dst, d0):
    """dst[d0:d0 + n] = src[s0:s0 + n] for one cache line of elements (n = LINE / width), as one
    vector load and one non-temporal store. The caller guarantees dst + d0 is line-aligned: a
    misaligned non-temporal store faults. src and dst hold the same element type (raw bits)."""
    if not _raw_pair(src, dst):
        return None

    def codegen(context, builder, signature, args):
        width = src.dtype.bitwidth // 8
        vec = ir.VectorType(ir.IntType(8 * width), LINE // width)
        set.add(builder.function.attributes, '"min-legal-vector-width"="512"')  # as in _transpose_typer
        line = builder.load(_lanes_at(context, builder, src, args[0], args[1], vec), align=width)
        _nontemporal(builder, builder.store(line, _lanes_at(context, builder, dst, args[2], args[3], vec), align=LINE))
        return context.get_dummy_value()

    return types.none(src, s0, dst, d0), codegen


@njit(inline="always")
def _stream_out(buf, m, o, s, po):
    """buf[:m] into o[s:s + m] (uint64 bounds; po: out's address): its whole lines non-temporally,
    the ragged ends before the first line boundary and after the last one element by element.
    Any out address works: the boundaries come from the address, not from s."""
    size, line = np.uint64(o.itemsize), np.uint64(LINE)
    head = min(m, (line - (np.uint64(po) + s * size) % line) % line // size)
    step = line // size
    whole = head + (m - head) // step * step
    for i in range(head):
        o[s + i] = buf[i]
    for i in range(head, whole, step):
        _stream_line(buf, i, o, s + i)
    for i in range(whole, m):
        o[s + i] = buf[i]


@njit(inline="always")
def _rows_out(held, j0, j1, nr, o, start, so1, stream):
    """Rows j0 to j1 of a tile ``held`` in out's order (row j's nr elements at j * nr) into out's
    rows from ``start``, so1 apart: whole lines non-temporally where ``stream`` and nr is a whole
    number of them (the launch has checked out's rows line-aligned), else element by element."""
    step = np.uint64(LINE // o.itemsize)
    for j in range(j0, j1):
        src, dst = j * nr, start + j * so1
        if stream and nr % step == 0:
            for i in range(np.uint64(0), nr, step):
                _stream_line(held, src + i, o, dst + i)
        else:
            for i in range(nr):
                o[dst + i] = held[src + i]


# ---- the table walk: out[i] = table[bits of target[i]] -------------------------------------------
#
# Where a formula reads only the target and scalars (KL with a 0-d gradient never reads self), out
# is a function of the target's bits alone: for a 16-bit target, a table of 2^16 entries holds it
# for every input, built once per launch by the formula's own loop (so each entry is bitwise what
# that loop stores for that target) and then gathered. It pays where the formula costs more per
# element than a gather does: log_target's exp (results/performance.md, section 22).
def _gather_tier() -> int:
    """Dword lanes per hardware gather: 16 with AVX-512 (vpgatherdd zmm), 8 with AVX2's ymm form, 0
    for none. ``LOSSTUNE_CPU_GATHER=0`` says none on any host."""
    if _host_has("avx512f", "LOSSTUNE_CPU_GATHER"):
        return 16
    if _host_has("avx2", "LOSSTUNE_CPU_GATHER"):
        return 8
    return 0


GATHER_LANES = _gather_tier()
HAS_GATHER = GATHER_LANES > 0
TABLE_ENTRIES = 1 << 16
TABLE_PAD = 2  # a gather reads 4 bytes at entry i: the last entry's upper half falls here


def _gather_call(builder: ir.IRBuilder, base: ir.Value, index: ir.Value) -> ir.Value:
    """One vpgatherdd of the host's lanes: dwords at base + 2 * index, every lane enabled."""
    words = ir.VectorType(_I32, GATHER_LANES)
    if GATHER_LANES == 16:
        every = ir.VectorType(ir.IntType(1), GATHER_LANES)
        kind = ir.FunctionType(words, [words, base.type, words, every, _I32])  # passthru, base, index, mask, scale
        gather = builder.module.declare_intrinsic("llvm.x86.avx512.mask.gather.dpi.512", (), kind)
        mask, scale = ir.Constant(every, [1] * GATHER_LANES), ir.Constant(_I32, 2)
    else:
        # AVX2's form takes its mask as dwords (a lane gathers where its sign bit is set) and an i8 scale.
        kind = ir.FunctionType(words, [words, base.type, words, words, ir.IntType(8)])
        gather = builder.module.declare_intrinsic("llvm.x86.avx2.gather.d.d.256", (), kind)
        mask, scale = ir.Constant(words, [-1] * GATHER_LANES), ir.Constant(ir.IntType(8), 2)
    return builder.call(gather, [ir.Constant(words, None), base, index, mask, scale])


@intrinsic
def _gather_lanes(typingctx, table, src, s0, dst, d0):
    """dst[d0 + i] = table[src[s0 + i] as unsigned] for i < the host's gather lanes, all 16-bit: one
    vector load of the indices, one vpgatherdd of dwords at table + 2 * index (x86 has no 16-bit
    gather; each dword's low half is the entry, hence TABLE_PAD), one truncating vector store."""
    if not _raw_pair(table, dst) or table.dtype.bitwidth != 16:
        return None
    if not isinstance(src, types.Array) or src.dtype.bitwidth != 16:
        return None

    def codegen(context, builder, signature, args):
        halves = ir.VectorType(ir.IntType(16), GATHER_LANES)
        words = ir.VectorType(_I32, GATHER_LANES)
        if GATHER_LANES == 16:
            set.add(builder.function.attributes, '"min-legal-vector-width"="512"')  # as in _transpose_typer
        index = builder.zext(builder.load(_lanes_at(context, builder, src, args[1], args[2], halves), align=2), words)
        base = builder.bitcast(context.make_array(table)(context, builder, args[0]).data, ir.IntType(8).as_pointer())
        got = _gather_call(builder, base, index)
        builder.store(builder.trunc(got, halves), _lanes_at(context, builder, dst, args[3], args[4], halves), align=2)
        return context.get_dummy_value()

    return types.none(table, src, s0, dst, d0), codegen


@njit(inline="always")
def _look_up(table, t, s, dst, d, m):
    """dst[d:d + m] = table[t[s:s + m]] (uint64 bounds): GATHER_LANES per gather, the rest one by one."""
    lanes = np.uint64(GATHER_LANES)
    whole = m // lanes * lanes
    for i in range(np.uint64(0), whole, lanes):
        _gather_lanes(table, t, s + i, dst, d + i)
    for i in range(whole, m):
        dst[d + i] = table[np.uint16(t[s + i])]  # same width: the bits, read unsigned


def _table(pt, tt, ptab, po, to, n, tile, nblocks, stream):
    """The gather walk over blocks and tiles as ``flat`` walks them; ``stream`` as there."""
    t, o, table = _view(pt, n, tt), _view(po, n, to), _view(ptab, TABLE_ENTRIES + TABLE_PAD, to)
    chunk = _block_share(n, nblocks)
    for b in prange(nblocks):
        buf = np.empty(tile if stream else 0, to.dtype)
        end = min(n, (b + 1) * chunk)
        for s in range(b * chunk, end, tile):
            us, stop = np.uint64(s), np.uint64(min(s + tile, end))
            if stream:
                _look_up(table, t, us, buf, np.uint64(0), stop - us)
                _stream_out(buf, stop - us, o, us, po)
            else:
                _look_up(table, t, us, o, us, stop - us)
        if stream:
            _sfence()


TABLE_WALK = (njit(nogil=True)(_table), njit(parallel=True, nogil=True)(_table))


# ---- the fused walk: a formula's form applied to the rows of the register transposes -----------
#
# The transposed walk runs the formula into an L1 buffer (pass (a)), then transposes the buffer
# into out (pass (b)). Where the formula is one of a few float32 forms (Formula.fused_form: KL
# without logTarget's negated scale, mse's scaled difference), it can be applied to the rows the
# register transposes load instead, between those loads (from the operands it reads) and the
# transposes' stores to out: no buffer, no second pass. Built to store nothing, the shipped walk
# took 1.50x its contiguous partner on kl_div float16 0-d at 2^22 on the Zen 5 (results/
# performance.md, section 91), so no store order alone could bring it within 1.5x.
def _fused() -> bool:
    """Whether the transposed walk offers the fused walk (Tiling.fused): on the CPUs of _FUSED_CPUS,
    where it was measured (the Zen 5, at 2^22 against the walks it replaced: kl_div's 0-d rows,
    float32 streamed 0.83-0.86x the time, float16 streamed 0.72x while the memory ran fast, with
    ordinary stores 0.86-0.91x while it ran slow and 0.99-1.05x while fast, section 92; kl_div
    bfloat16 0-d 0.84x, float16 full 0.88x, float32 0.92-0.94x, mse's rows no faster, its full
    gradient rows slower, section 93: the tuner keeps the fused walk per bucket where it wins),
    with F16C (its float16 conversions are LLVM's fpext and fptrunc). Not on the Intel Xeon
    (rocketlake): offered there, its best trial took 1.05-1.31x the time of its study's best on
    each of the 8 mse and kl_div 16-bit transposed rows at 2^22, 1.37-1.58x on the 4 float32 ones
    (section 96).
    ``LOSSTUNE_CPU_FUSED`` 1 offers it on any host with F16C, 0 on none."""
    forced = _forced("LOSSTUNE_CPU_FUSED")
    return HAS_F16C and (target_cpu() in _FUSED_CPUS if forced is None else forced)


_FUSED_CPUS = ("znver5",)
FUSED = _fused()
# Input rows per step of a block in the fused walk, all its columns in strips of one register
# block: its out rows then take runs of FUSED_ROWS elements. No buffer bounds it; on kl_div 0-d at
# 2^22, 4096 took 0.90-1.00x the time of 128 (the walk's tile) with streamed stores, and 0.54x with
# float32's ordinary ones (results/performance.md, section 92; not measured again for the other
# forms).
FUSED_ROWS = 4096
# The element types the fused transposes convert, as the loops' _load and _store do: float16 by
# fpext/fptrunc (F16C), bfloat16 by a shift and _bf16_narrow's rounding (_bf16_round_hw with
# AVX512-BF16, else _bf16_round), float32 as it is.
_FUSED_TYPES = (types.int16, types.uint16, types.float32)


def fused_by_rows(form: FusedForm, full: bool) -> bool:
    """Whether the fused walk of ``form`` (with a full gradient where ``full``) converts each row
    before its transposes, more than the target being read; else (KL's negated scale with a 0-d
    gradient: the target alone) it transposes the raw rows and converts each column on its way
    out (_make_fused_transpose)."""
    return full or form is not FusedForm.NEGATED_SCALE


def _fused_value(builder: ir.IRBuilder, form: FusedForm, g: ir.Value, x: ir.Value, t: ir.Value, cof: ir.Value):
    """``form`` on float32 vectors, its operations in the formula's order (numba's loop of the same
    formula compiles the same IEEE operations, so the same bits)."""
    if form is FusedForm.NEGATED_SCALE:
        return builder.fmul(builder.fmul(builder.fneg(t), g), cof)
    return builder.fmul(builder.fmul(builder.fsub(x, t), cof), g)


def _make_fused_transpose(form: FusedForm, row_bytes: int, stream: bool, paired: bool = False) -> Callable[..., None]:
    """``_make_transpose(stream, 2, row_bytes)`` of a tile of ``form``'s values, from the operands
    the form reads (x, t and g where g is an array; a float32 ``g`` is the one gradient value;
    ``cof`` float32): each value widened to float32 as the loops' _load does, taken through
    _fused_value and rounded back once as their _store does. x, t, g and dst hold one element type
    (_FUSED_TYPES) and step alike: row i of each at s0 + i * ss. Same bits as the formula's loops
    (tests: test_fused_walk).

    Where the target is the one array read (a negated scale with a 0-d gradient), its raw rows are
    transposed and each column is converted on its way to its store, as the register transpose of
    one operand costs no more than the plain walk's. Where more are read, each row is converted
    once (widened, the form, rounded) and the rounded rows are transposed: the columns of each
    operand would take one transpose each (section 93).

    ``paired``: row i of both stacked blocks side by side in one register of twice the row
    (_transpose_lanes' halves), so each shuffle, conversion and store takes both blocks, and each column
    of the pair leaves as one whole line of out: half the shuffles of two stacked transposes (plus
    one insert a row pair to join the rows), and with AVX512-BF16 a bfloat16 pair rounded in one
    vcvtne2ps2bf16 (results/performance.md, section 94). 16-bit types only: float32's paired build
    let LLVM commute a multiply, keeping the other operand's NaN where two meet (the space offers
    none, cpu.CpuBackend.space)."""

    @intrinsic
    def fused_transpose(typingctx, g, x, t, s0, ss, dst, d0, ds, cof):
        full = isinstance(g, types.Array)
        read = (x, t, g) if full else (x, t)
        if not (isinstance(dst, types.Array) and dst.dtype in _FUSED_TYPES):
            return None
        if not all(isinstance(a, types.Array) and a.dtype == dst.dtype for a in read):
            return None
        if not (cof == types.float32 and (full or g == types.float32)):
            return None
        width = dst.dtype.bitwidth // 8
        by_rows = fused_by_rows(form, full)
        # Paired rows are the row walk's alone (_paired_walks), and 16-bit: float32's build let
        # LLVM commute a multiply and keep the other operand's NaN where two meet (test_fused_walk).
        if paired and (not by_rows or width == 4):
            return None
        # Each row passes through an empty asm that asks for a register of its width (twice the row
        # where paired): one the host lacks (a paired half row, a whole line, without AVX-512) stops
        # LLVM itself and kills the process ("couldn't allocate output register for constraint
        # 'v'"), so such a build finds no implementation instead.
        if (2 * row_bytes if paired else row_bytes) > vector_bytes():
            return None

        def codegen(context, builder, signature, args):
            n = _block(width, row_bytes)
            m = 2 * n if paired else n  # the lanes of one register row
            floats = ir.VectorType(ir.FloatType(), m)
            vec = floats if width == 4 else ir.VectorType(ir.IntType(16), m)
            one = ir.VectorType(vec.element, n)  # one row of one block, as loaded
            # 16-bit rows widen to twice their bits
            set.add(builder.function.attributes, f'"min-legal-vector-width"="{8 * m * 4}"')

            def splat(v: ir.Value) -> ir.Value:
                first = builder.insert_element(ir.Constant(floats, ir.Undefined), v, ir.Constant(_I32, 0))
                return builder.shuffle_vector(first, first, ir.Constant(ir.VectorType(_I32, m), [0] * m))

            # Row i of an operand at quads[i // 4] + (i % 4) rows: a pointer four rows on from the
            # last, each load at one of four offsets. A row's own offset from s0, invariant in the
            # walk's loop, was hoisted out of it by LLVM: a register a row, spilled and reloaded.
            ss_ = args[4]
            offsets = [
                ir.Constant(ss_.type, k) if k == 0 else builder.mul(ss_, ir.Constant(ss_.type, k)) for k in range(5)
            ]
            quads: dict[int, list[ir.Value]] = {}

            def load(k: int, i: int) -> ir.Value:  # row i of operand k (0 g, 1 x, 2 t), raw
                if k not in quads:
                    data = context.make_array(signature.args[k])(context, builder, args[k]).data
                    quads[k] = [builder.gep(builder.bitcast(data, vec.element.as_pointer()), [args[3]])]
                while len(quads[k]) <= i // 4:
                    quads[k].append(builder.gep(quads[k][-1], [offsets[4]]))
                at = builder.bitcast(builder.gep(quads[k][i // 4], [offsets[i % 4]]), one.as_pointer())
                return builder.load(at, align=width)

            def row(k: int, i: int) -> ir.Value:  # row i of block 0, paired: beside row i of block 1
                if not paired:
                    return load(k, i)
                both = ir.Constant(ir.VectorType(_I32, m), list(range(m)))
                return builder.shuffle_vector(load(k, i), load(k, n + i), both)

            def widen(v: ir.Value) -> ir.Value:
                if dst.dtype == types.int16:
                    return builder.fpext(builder.bitcast(v, ir.VectorType(ir.HalfType(), m)), floats)
                if dst.dtype == types.uint16:
                    return _bf16_widen(builder, v)
                return v

            def narrow(v: ir.Value) -> ir.Value:
                if dst.dtype == types.int16:
                    return builder.bitcast(builder.fptrunc(v, ir.VectorType(ir.HalfType(), m)), vec)
                if dst.dtype == types.uint16:
                    return (_bf16_round_hw if HAS_BF16 else _bf16_round)(builder, v)
                return v

            cs, gs = splat(args[8]), None if full else splat(args[0])
            columns = []
            for b in range(1 if paired else 2):
                rows = []
                for i in range(b * n, (b + 1) * n):
                    if not by_rows:
                        rows.append(load(2, i))
                        continue
                    x_ = widen(row(1, i)) if form is FusedForm.SCALED_DIFFERENCE else None
                    v = narrow(_fused_value(builder, form, widen(row(0, i)) if full else gs, x_, widen(row(2, i)), cs))
                    # An empty asm the row passes through: without it LLVM moved the transposes'
                    # shuffles above the rounding, into float32 lanes, twice the bits to shuffle.
                    rows.append(builder.call(ir.InlineAsm(ir.FunctionType(vec, [vec]), "", "=v,0"), [v]))
                columns.append(_transpose_lanes(builder, rows, _LANE_BYTES // width, halves=paired))

            def value(c: ir.Value) -> ir.Value:  # a raw column of the target: converted as it is stored
                return narrow(_fused_value(builder, form, gs, None, widen(c), cs))

            stored = LINE if paired else row_bytes  # paired, each column is one whole line of out
            _store_columns(context, builder, dst, args[5:8], columns, stored, stream, None if by_rows else value)
            return context.get_dummy_value()

        return types.none(g, x, t, s0, ss, dst, d0, ds, cof), codegen

    return fused_transpose


def fused_fits(shape: tuple[int, ...], strides: tuple[tuple[int, ...], ...], row: int, itemsize: int) -> bool:
    """Whether the fused walk takes a transposed problem of ``shape`` (rows, cols) whose operands
    read step ``strides`` (elements, one tuple each, the target's first) and whose config's
    register row is ``row``: every operand read steps as the target does, unit-stride along the
    columns, the rows a whole number of stacked block pairs and the columns of blocks (elsewhere
    the launch takes the config's own walk, the same bits)."""
    side = _row_bytes(row) // itemsize
    fits = len(shape) == 2 and strides[0][1] == 1 and shape[0] % (2 * side) == 0 and shape[1] % side == 0
    return fits and all(s == strides[0] for s in strides)


@njit(inline="always")
def _one_gradient(pg, span, tag, g0):
    """The fused walk's gradient with a 0-d one: its value, float32."""
    return np.float32(g0)


@njit(inline="always")
def _gradient_array(pg, span, tag, g0):
    """The fused walk's gradient with a full one: the array at pg."""
    return _view(pg, span, tag)


def _fused_walk(form: FusedForm, scalar_g: bool, row: int, paired: bool = False) -> Callable[..., None]:
    """The fused walk of ``form`` with a 0-d gradient (``scalar_g``, its value g0) or a full one,
    register rows ``row`` (Tiling.transpose_row): block b takes a contiguous share of the
    operands' rows, FUSED_ROWS at a time, each step strip by strip of one block's columns, each
    strip two stacked blocks (_make_fused_transpose) at a time down its rows, out's rows so1 apart.
    ``stream``: the column stores are non-temporal (the launch has checked out's rows
    line-aligned, as for the transposed walk). The launch has checked fused_fits: every operand
    read steps st0 a row. ``paired``: the two stacked blocks share each register (half rows)."""
    row_bytes = _row_bytes(row)
    pair, pair_nt = (_make_fused_transpose(form, row_bytes, nt, paired) for nt in (False, True))
    gradient = _one_gradient if scalar_g else _gradient_array

    def fused(
        pg, px, pt, po, tg, tx, tt, to, g_span, x_span, t_span, o_span, rows, cols, st0, so1, g0, cof64, nblocks, stream
    ):
        g, x, t = gradient(pg, g_span, tg, g0), _view(px, x_span, tx), _view(pt, t_span, tt)
        o, cof = _view(po, o_span, to), np.float32(cof64)
        side = np.uint64(row_bytes // o.itemsize)
        two, urows, ucols, ust0, uso1 = (
            np.uint64(2) * side,
            np.uint64(rows),
            np.uint64(cols),
            np.uint64(st0),
            np.uint64(so1),
        )
        step = np.uint64(FUSED_ROWS)
        share = ((urows // two + np.uint64(nblocks) - np.uint64(1)) // np.uint64(nblocks)) * two
        for b in prange(nblocks):
            start, end = np.uint64(b) * share, min(urows, (np.uint64(b) + np.uint64(1)) * share)
            for r0 in range(start, end, step):
                r1 = min(r0 + step, end)
                for c in range(np.uint64(0), ucols, side):
                    for r in range(r0, r1, two):
                        if stream:
                            pair_nt(g, x, t, r * ust0 + c, ust0, o, c * uso1 + r, uso1, cof)
                        else:
                            pair(g, x, t, r * ust0 + c, ust0, o, c * uso1 + r, uso1, cof)
            if stream:
                _sfence()

    return fused


def _walk_builds(
    form: FusedForm, scalar_g: bool, row: int, paired: bool = False
) -> tuple[Callable[..., None], Callable[..., None]]:
    """The serial and the parallel build of one fused walk (_fused_walk)."""
    walk = _fused_walk(form, scalar_g, row, paired)
    return njit(nogil=True)(walk), njit(parallel=True, nogil=True)(walk)


# By (form, a 0-d gradient, register row): the serial and the parallel build.
FUSED_WALKS = {
    (form, scalar_g, row): _walk_builds(form, scalar_g, row)
    for form in FusedForm
    for scalar_g in (True, False)
    for row in TRANSPOSE_ROWS
}


def _paired() -> bool:
    """Whether the fused walk offers paired half rows (Tiling.paired, _make_fused_transpose) for the
    walks that convert rows (_paired_walks): where it offers half rows (TRANSPOSE_ROWS) and a
    register holds a whole line (AVX-512), on the CPUs of _PAIRED_CPUS, where it was measured (the
    Zen 5 at 2^22 against the plain half rows' streamed stores, one 7-round and one 3-round run:
    mse bfloat16 0-d 0.92 and 0.94x the time, full 1.03 and 0.94x; kl_div bfloat16 full 0.94 and
    1.01x; float16 1.01-1.13x: results/performance.md, section 94, so the tuner decides per
    bucket). The Zen 4 (_SPLIT_512) is not in _PAIRED_CPUS: it runs each 512-bit operation as two
    256-bit halves, so halving the shuffles' count would not halve their cost there; nor the Intel
    Xeon (rocketlake), where its best trial took 1.09-1.40x its study's best on the 16-bit rows
    that offered it (section 96). The space
    offers it for 16-bit outs (cpu.CpuBackend.space). ``LOSSTUNE_CPU_PAIRED`` 1 offers it on any
    host that has the rest, 0 on none."""
    forced = _forced("LOSSTUNE_CPU_PAIRED")
    offered = target_cpu() in _PAIRED_CPUS if forced is None else forced
    return FUSED and offered and LINE // 2 in TRANSPOSE_ROWS and target_features().get("avx512f", False)


_PAIRED_CPUS = ("znver5",)
PAIRED = _paired()


def _paired_walks() -> dict[tuple[FusedForm, bool, int], tuple[Callable[..., None], Callable[..., None]]]:
    """The paired fused walks, by (form, a 0-d gradient, register row: half a line), as FUSED_WALKS:
    those that convert rows (fused_by_rows). KL's 0-d walk converts columns, and paired, each
    column's conversion first splits its register in two: at 2^22 it took 1.08-1.10x the time of
    the plain half rows with ordinary stores (the faster kind there) on bfloat16 and 0.94-1.11x on
    float16, in three runs (section 94)."""
    half = LINE // 2
    return {
        (form, scalar_g, half): _walk_builds(form, scalar_g, half, paired=True)
        for form in FusedForm
        for scalar_g in (True, False)
        if fused_by_rows(form, not scalar_g)
    }


PAIRED_WALKS = _paired_walks() if PAIRED else {}


@intrinsic
def _prefetch(typingctx, a, i):
    """Prefetch the line holding a[i] into every cache level (``llvm.prefetch``: read, locality 3,
    data), a prefetcht0. A hint: it never faults, so a line past the end costs nothing but a slot."""
    if not isinstance(a, types.Array) or not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        data = context.make_array(a)(context, builder, args[0]).data
        i8p = ir.IntType(8).as_pointer()
        signature_ = ir.FunctionType(ir.VoidType(), [i8p, _I32, _I32, _I32])  # address, rw, locality, cache
        fn = builder.module.declare_intrinsic("llvm.prefetch", [i8p], signature_)
        line = builder.bitcast(builder.gep(data, [args[1]]), i8p)
        builder.call(fn, [line, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return types.none(a, i), codegen


@njit(inline="always")
def _prefetch_window(a, start, count, n):
    """Prefetch the lines of a[start:start + count], clamped to n (uint64 bounds), one hint per 64-byte line."""
    for i in range(min(start, n), min(start + count, n), np.uint64(LINE // a.itemsize)):
        _prefetch(a, i)


@njit(inline="always")
def _prefetch_inputs(x, t, own_x, start, count, n):
    """The window of x and t; x is skipped where it is t (``own_x`` false: a formula that never
    reads self is handed target twice)."""
    if own_x:
        _prefetch_window(x, start, count, n)
    _prefetch_window(t, start, count, n)


@intrinsic
def _wide_vectors(typingctx):
    """Marks the function being compiled to prefer 512-bit vectors (LLVM's per-function
    ``prefer-vector-width``; the host CPU model alone says 256, and NUMBA_CPU_FEATURES would say
    512 for every loop in the process). Call it inside the prange body: numba outlines that into a
    function of its own. Where the host has no AVX-512, LLVM caps the width at the legal one."""

    def codegen(context, builder, signature, args):
        # llvmlite lists only the enum attributes; a string attribute is written as it stands.
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()

    return types.none(), codegen


@njit(inline="always")
def _default_vectors() -> None:
    """The host CPU model's vector width: the memory-bound formulas measured no faster at 512."""


def _load(a, i):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


def _store(a, i, v):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


# No inline="always" on the overloads: numba-IR inlining them kept LLVM from vectorising the
# 16-bit loops (5x slower, results/performance.md); LLVM inlines them anyway.
@overload(_load)
def _load_impl(a, i):
    if a.dtype == types.float32:
        return lambda a, i: a[i]
    if a.dtype == types.uint16:
        return lambda a, i: _bf16_to_f32(a[i])
    if a.dtype == types.int16:
        return lambda a, i: _f16_widen(a[i])
    raise TypeError(f"unsupported element type {a.dtype}")


@overload(_store)
def _store_impl(a, i, v):
    if a.dtype == types.float32:

        def store_f32(a, i, v):
            a[i] = v

        return store_f32
    if a.dtype == types.uint16:

        def store_bf16(a, i, v):
            a[i] = _bf16_narrow(v)

        return store_bf16
    if a.dtype == types.int16:

        def store_f16(a, i, v):
            a[i] = _f16_narrow(v)

        return store_f16
    raise TypeError(f"unsupported element type {a.dtype}")


def _store_or_flag(a, i, v):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


# The checked twins' store (make_cpu_kernels' twin passes, whose flagged tiles and runs are redone
# by the formula's; but normal_run's, whose 0-d bfloat16 values cannot be subnormal where its tile
# is not flagged, _store_unfixed): where the host has AVX512-BF16, a bfloat16 store without _f32_to_bf16_hw's
# subnormal fix-up (three vector operations, two under masks), flagged where the value is a nonzero
# subnormal; every other store is _store's, never flagged. On the Zen 5 the fix-up was a quarter
# of the bfloat16 exp loop (results/performance.md, sections 64 and 68).
@overload(_store_or_flag)
def _store_or_flag_impl(a, i, v):
    if a.dtype == types.uint16 and HAS_BF16:

        def store_bf16_or_flag(a, i, v):
            a[i] = _f32_to_bf16_unfixed(v)
            return _f32_subnormal(v)

        return store_bf16_or_flag

    def store_never_flag(a, i, v):
        _store(a, i, v)
        return False

    return store_never_flag


def _store_unfixed(a, i, v):  # pragma: no cover - replaced by the overload below inside numba
    raise NotImplementedError


@overload(_store_unfixed)
def _store_unfixed_impl(a, i, v):
    """A bfloat16 store by vcvtneps2bf16 alone (_f32_to_bf16_unfixed: a nonzero subnormal v comes out
    as a zero of its sign), where the host has AVX512-BF16; _store elsewhere. Only for values
    that are zero or normal float32 where they are not flagged (Formula.normal_low)."""
    if a.dtype == types.uint16 and HAS_BF16:

        def store_bf16_unfixed(a, i, v):
            a[i] = _f32_to_bf16_unfixed(v)

        return store_bf16_unfixed
    return lambda a, i, v: _store(a, i, v)


def _normal_types(t: types.Array, a: types.Array) -> bool:
    """Whether a twin pass or run with a one-value gradient can store into ``a`` by
    _store_unfixed (make_cpu_kernels' normal_run): a bfloat16 out on a host with AVX512-BF16, from
    a 16-bit target, whose tile flag can hold Formula.normal_low (a float32 t's flag is per
    element and holds only the twin's own range). Read from numba's types while a loop is typed."""
    return a.dtype == types.uint16 and HAS_BF16 and t.dtype in (types.int16, types.uint16)


class StridedRun(StrEnum):
    """The kind of the strided walk's runs along the innermost dim; each has a build of its own."""

    SCALAR_G = "scalar_g"  # self, target and out at unit stride, the gradient at stride 0 (a 0-d one)
    UNIT = "unit"  # every operand at unit stride
    ANY = "any"  # any other strides: the loop indexes each operand by its stride


def strided_run(strides: np.ndarray) -> StridedRun:
    """Which build of the strided walk takes a geometry whose element strides are ``strides`` (rows
    g, x, t, o; innermost dim last)."""
    if strides.shape[1] == 0:
        return StridedRun.ANY
    sg, sx, st, so = (int(v) for v in strides[:, -1])
    if sx == 1 and st == 1 and so == 1 and sg in (0, 1):
        return StridedRun.SCALAR_G if sg == 0 else StridedRun.UNIT
    return StridedRun.ANY


def transposed_run(strides: np.ndarray) -> StridedRun:
    """The kind of the runs a transposed geometry's pass (a) takes along dim 1 (strides as in
    strided_run, 2-d): out's stride does not count, as pass (a) writes an L1 buffer, not out."""
    unit_out = strides.copy()
    unit_out[3, -1] = 1
    return strided_run(unit_out)


# The reduce walk along the summed dims: lanes per output, a constant that is the same on every host
# so that the sum's order is the geometry's alone. 64 lanes are four independent Kahan chains of
# 512-bit vectors (eight of 256-bit ones): 16 lanes, one chain, took 4-6x longer, waiting on its
# adds (results/performance.md, section 51). Summing the lanes costs some 800 cycles per output,
# so the walk takes only outputs of at least REDUCE_ALONG_SUM summed elements.
REDUCE_LANES = 64
REDUCE_ALONG_SUM = 2048


def reduce_along(rshape: np.ndarray, rstrides: np.ndarray) -> bool:
    """Whether a reduce geometry (the summed dims' shape and element strides, rows g, x, t) sums
    along its innermost summed dim: a run of at least REDUCE_LANES elements at unit stride in
    target, the gradient at unit stride or stride 0 along it, and REDUCE_ALONG_SUM elements or more
    summed into each output."""
    run_ok = int(rshape[-1]) >= REDUCE_LANES and int(rstrides[2, -1]) == 1 and int(rstrides[0, -1]) in (0, 1)
    return run_ok and int(np.prod(rshape)) >= REDUCE_ALONG_SUM


# The reduce walk sums each run of the innermost summed dim in groups of REDUCE_TERMS terms from the
# run's start, each group's values added in plain float32 left to right, then one Kahan step per
# group; a run's last run % REDUCE_TERMS terms take a Kahan step each. A step costs four dependent
# adds, the group's sum one per term, and the error stays far inside SEMANTICS' 1e-5 (three roundings
# of a group's magnitudes, then Kahan's). The unit-stride lanes take a group per pass over them,
# each lane's sum kept in registers across it (results/performance.md, section 55). The group is
# written out four terms wide in the walk, and blocked chunks start at multiples of a transpose's
# side, which the assert below keeps a multiple of it.
REDUCE_TERMS = 4


@njit(inline="always")
def _kept_at(e, kshape, kstrides):
    """Output ``e`` (linear, in the kept dims' order): its index along the innermost kept dim, and
    its base offsets in g, x, t and out."""
    bg = bx = bt = bo = 0
    rem = e
    first = 0
    for d in range(kshape.shape[0] - 1, -1, -1):
        q = rem % kshape[d]
        rem //= kshape[d]
        if d == kshape.shape[0] - 1:
            first = q
        bg += q * kstrides[0, d]
        bx += q * kstrides[1, d]
        bt += q * kstrides[2, d]
        bo += q * kstrides[3, d]
    return first, bg, bx, bt, bo


@njit(inline="always")
def _summed_at(r, bg, bx, bt, rshape, rstrides, nd):
    """The offsets in g, x and t of element ``r`` (linear, in their order) of the first ``nd``
    summed dims, from base offsets ``bg``, ``bx``, ``bt``: unsigned, as strides here are never
    negative."""
    og, ox, ot = bg, bx, bt
    rem = r
    for d in range(nd - 1, -1, -1):
        q = rem % rshape[d]
        rem //= rshape[d]
        og += q * rstrides[0, d]
        ox += q * rstrides[1, d]
        ot += q * rstrides[2, d]
    return np.uint64(og), np.uint64(ox), np.uint64(ot)


_INF32 = np.float32(np.inf)


@njit(inline="always")
def _kahan(s, c, v):
    """One Kahan step of value ``v`` into sum ``s`` with compensation ``c``, all float32. Once the
    sum is infinite (or NaN) its compensation is 0, not inf - inf = NaN: an infinite term followed
    by finite ones stays infinite, as the formula's sum is (the NaN turned it NaN)."""
    y = v - c
    tot = np.float32(s + y)
    comp = np.float32(np.float32(tot - s) - y)
    return tot, comp if np.abs(tot) < _INF32 else np.float32(0.0)


# The reduce walk's strided lanes over a unit-stride summed run (input (R, 1) against target (R, C)):
# each lane's run is loaded as whole vectors and turned into the lanes' order by the register
# transposes, side x side elements at a time, where one strided load per element took 5-15x the
# contiguous case's time (results/performance.md, section 53). REDUCE_BLOCK_LANES lanes at a time,
# so that their staged blocks (side x 256 elements, 8-16 KiB) stay in L1 while they are summed; the
# rows are those of the host's narrowest register transpose (half lines on Zen 4, section 36).
# Neither changes a lane's order: each output still sums its terms in ascending order.
REDUCE_BLOCK_LANES = 256
REDUCE_ROW = TRANSPOSE_ROWS[-1]
assert _row_bytes(REDUCE_ROW) // 4 % REDUCE_TERMS == 0, "a blocked chunk's side must hold whole groups"


def reduce_run(strides: np.ndarray) -> StridedRun:
    """The kind of the reduce walk's lanes along the innermost kept dim (strides as in strided_run,
    the kept dims'): out's stride does not count, as the lanes sum into accumulators and out is
    written once per output, after its sum."""
    return transposed_run(strides)


@dataclass(frozen=True)
class CpuKernels:
    """The compiled loops of one formula; ``serial`` for one core (no thread pool), ``parallel`` otherwise."""

    flat: tuple[Callable[..., None], Callable[..., None]]
    scalar_grad: tuple[Callable[..., None], Callable[..., None]]
    # by the kind of its innermost runs (strided_run)
    strided: dict[StridedRun, tuple[Callable[..., None], Callable[..., None]]]
    # by (tile, transpose_row): TRANSPOSED_TILES by TRANSPOSE_ROWS
    transposed: dict[tuple[int, int], tuple[Callable[..., None], Callable[..., None]]]
    # by the kind of its lanes along the innermost kept dim (reduce_run)
    reduce: dict[StridedRun, tuple[Callable[..., None], Callable[..., None]]]
    # the transposed walk in its inputs-first order (Tiling.transpose_in), keyed as transposed
    transposed_in: dict[tuple[int, int], tuple[Callable[..., None], Callable[..., None]]]
    # the transposed walk with out's stores deferred into the next tile's pass (a) (Tiling.defer_out),
    # by (tile, transpose_row, the kind of pass (a)'s runs: transposed_run)
    transposed_deferred: dict[tuple[int, int, StridedRun], tuple[Callable[..., None], Callable[..., None]]]
    # the reduce walk along the summed dims (reduce_along), by whether the gradient is at stride 0 along them
    reduce_along: dict[bool, tuple[Callable[..., None], Callable[..., None]]]


@njit(inline="always")
def _stage_ragged(a, buf, start, stride, first, lanes, side, width):
    """buf[j * width + i] = a[start + i * stride + j] for first <= i < lanes, j < side: the lanes
    after the last whole transpose block, one raw element at a time."""
    for i in range(first, lanes):
        for j in range(side):
            buf[j * width + i] = a[start + i * stride + j]


_APART_RUN = 128  # the shortest strided run the walks apart take as a call (make_cpu_kernels' apart_rows)
_SKIP_TILES = 16  # after a tile whose checked twin flagged an element (make_cpu_kernels' checked loops)


def make_cpu_kernels(
    value_py: Callable[..., float],
    compute_bound: bool = False,
    checked_py: Callable[..., tuple[float, bool]] | None = None,
    apart: bool | None = None,
    checked_range: Callable[[float], tuple[float, float]] | None = None,
    normal_low: Callable[[float, float], float] | None = None,
    raw_flag: bool | None = None,
    deferred_twin: bool = False,
) -> CpuKernels:
    """Build the loops around ``value_py(g, x, t, cof)``; numba compiles each lazily per dtype set.
    ``compute_bound`` (Formula.compute_bound): every loop prefers 512-bit vectors. ``checked_py``
    (Formula.checked_value): value_py's cheap twin with a flag, for the contiguous loops apart,
    the walks' runs apart and the reduce walk's unit-stride lanes (whatever ``apart``).
    ``apart``: the contiguous loops call a function of their own per tile (TILES_APART), and so do
    the strided and transposed walks' long unit-stride runs; None: where the formula is
    compute-bound and the host is one of TILES_APART's. ``checked_range`` (Formula.checked_range):
    the t interval, for a cof, where the twin's flag is never set; with RAW_FLAG, the contiguous
    twin pass and the walks' twin runs apart flag a 16-bit target's tile or run from its raw
    patterns against it. ``normal_low`` (Formula.normal_low): for a cof and a one-value gradient,
    the least t from which the twin's values are zero or normal; with it, the raw flag pass and
    the walks' raw flag runs of a 0-d gradient store a bfloat16 out of a 16-bit target with no
    per-element flag (normal_run). ``raw_flag``: whether those raw flags are built (with
    ``checked_range``); None: where the host is one of RAW_FLAG's (a backend that takes the twin
    for one dtype's outputs alone, where RAW_FLAG is off, asks for them: cpu.checked_bf16_offered).
    ``deferred_twin`` (with normal_low's store): the deferred transposed walk's whole dense tiles
    with a 0-d gradient take the twin too, inline (twin_pieces); asked for by the backend that
    takes the twin for bfloat16 outputs alone (cpu.checked_bf16_offered), so that no other host's
    deferred walk, and no table entry tuned on one, changes."""
    value = njit(inline="always")(value_py)
    vectors = _wide_vectors if compute_bound else _default_vectors

    # The element index of the contiguous loops is unsigned: with a signed one numba must allow for
    # Python's negative indexing on every load and store, which kept LLVM from vectorising the
    # loops (3x on a float16 loop, measured in results/performance.md).
    # ``ahead`` > 0: before each tile, a block prefetches its inputs' lines ``ahead`` elements on
    # (one tile's worth), so the loads of the next tiles overlap this tile's arithmetic. x is
    # skipped where it is t (a formula that never reads self is handed target twice).
    # ``stream``: each tile's values go into an L1 buffer first, then into out as whole lines
    # stored non-temporally (_stream_out): a line of out is then never read in before it is
    # written (no read-for-ownership), which saves a third of the traffic of a one-input loop once
    # out no longer fits the last-level cache, and costs where it still does (results/performance.md,
    # section 20): the tuner decides, per problem (tiling.cpu_space).
    # ``scalar_g``: the 0-d gradient of mean/sum, read once rather than n times (the scalar_grad
    # variant); a closure constant, so each build keeps only its own branch.
    def contiguous(scalar_g: bool) -> Callable[..., None]:
        def loop(pg, px, pt, po, tg, tx, tt, to, n, cof64, tile, ahead, nblocks, stream):
            g, x, t, o = _view(pg, 1 if scalar_g else n, tg), _view(px, n, tx), _view(pt, n, tt), _view(po, n, to)
            cof = np.float32(cof64)
            g0 = _load(g, 0)
            chunk = _block_share(n, nblocks)
            un, uahead, own_x = np.uint64(n), np.uint64(ahead), px != pt
            for b in prange(nblocks):
                vectors()
                buf = np.empty(tile if stream else 0, to.dtype)
                end = min(n, (b + 1) * chunk)
                for s in range(b * chunk, end, tile):
                    us, stop = np.uint64(s), np.uint64(min(s + tile, end))
                    if uahead:
                        if not scalar_g:
                            _prefetch_window(g, us + uahead, np.uint64(tile), un)
                        _prefetch_inputs(x, t, own_x, us + uahead, np.uint64(tile), un)
                    if stream:
                        for i in range(stop - us):
                            gi = g0 if scalar_g else _load(g, us + i)
                            _store(buf, i, value(gi, _load(x, us + i), _load(t, us + i), cof))
                        _stream_out(buf, stop - us, o, us, po)
                    else:
                        for i in range(us, stop):
                            gi = g0 if scalar_g else _load(g, i)
                            _store(o, i, value(gi, _load(x, i), _load(t, i), cof))
                if stream:
                    _sfence()

        return loop

    # A formula's checked twin (``checked_py``), where it has one: each tile takes the twin, whose
    # flag says where its cheap step was not exact, and is done again with the formula where any was
    # (KL log_target's scale by 2^k in one power of two where ldexp takes three: k leaves [-126,
    # 127] only for |t| past ~60 or an extreme gradient). The flags fold into one bool per tile,
    # an OR that vectorises with the loop; the redo is the same loop, so a redone tile's values are
    # the formula's bits, as every other element's are (the twin's equal them where unflagged).
    # Data where most tiles hold a flagged element (log-targets of -inf, the log of a zero
    # probability, scattered through them) would pay twin and formula on each, 1.8-2.5x the
    # formula's own loop (measured, 2^20 float32, 0.1% of -inf); so after a flagged tile the next
    # _SKIP_TILES of the block take the formula alone: at worst (1.7 + 16) / 17 = 1.04x it, where
    # data with no flag keep the twin's every tile. The elementwise twin runs only in the loops
    # apart (below): the hosts where it saves anything (CHECKED_SCALE) are those of TILES_APART;
    # with the loops forced inline (LOSSTUNE_CPU_APART=0) a formula runs its own loop, the same
    # bits. The reduce walk's unit-stride lanes take the twin whatever ``apart`` (lane_sums).
    checked = None if checked_py is None else njit(inline="always")(checked_py)

    # The contiguous loops with each tile's element loop in a function of its own (``apart``), called
    # through _apart, which LLVM does not inline: the exp's constants are then hoisted to that
    # function's entry, once a tile, and held in registers across its vector loop (TILES_APART).
    # One build serves a formula with a checked twin and one without: without, the twin is the
    # formula with a flag that is never set, which LLVM folds away, so every tile takes one pass.
    # New code beside contiguous rather than a change of it, so that no other build's IR changes.
    flagless = njit(inline="always")(lambda g, x, t, cof: (value(g, x, t, cof), False))
    twin_value = checked or flagless
    # The twin passes' stores through _store_or_flag only where it has a cheaper store to offer
    # (AVX512-BF16's): a closure constant, so elsewhere numba prunes the branch and the loops'
    # IR is what it was before _store_or_flag (tuner.restamp keeps those hosts' entries).
    unfixed = HAS_BF16
    raw_flags = (RAW_FLAG if raw_flag is None else raw_flag) and checked is not None and checked_range is not None
    range_of = None if checked_range is None else njit(inline="always")(checked_range)
    # A bfloat16 out flagged per element (_store_or_flag) took 2.13 ns per 16 elements in L1 where
    # the same loop without that flag took 1.59 (section 68's C), and with a one-value gradient
    # whether a value can be subnormal is a matter of t alone: the tile's raw flag against
    # the range raised to normal_low(cof, g) says it once a tile or run (normal_run).
    low_of = njit(inline="always")(normal_low or (lambda cof, g: np.float32(-np.inf)))
    normals = raw_flags and normal_low is not None

    @njit(nogil=True)
    def normal_run(g, x, t, dst, ug, ux, ut, ud, m, cof):
        """``m`` elements by the twin, the one-value gradient read at ug, the target from ut, into dst
        from ud on, for a bfloat16 out of a 16-bit target (_normal_types): the raw flag pass's
        (and the walks' raw flag run's) patterns held to t >= normal_low(cof, g) too, so every
        unflagged value is zero or normal and _store_unfixed's one conversion stores it exactly,
        with no flag a value; a bound not below 0 (no interval around 0) flags every call."""
        vectors()
        g0 = _load(g, ug)
        lo, hi = range_of(cof)
        lo = max(lo, low_of(cof, g0))
        neg, pos = _half_limits(t, lo, hi)
        hu, hs = np.uint16(0), np.int16(-32768)
        for i in range(m):
            v, _ = twin_value(g0, _load(x, ux + i), _load(t, ut + i), cof)
            hu, hs = _track(t, ut + i, hu, hs)
            _store_unfixed(dst, ud + i, v)
        return (hu > neg) | (hs > pos) | (lo >= np.float32(0.0))

    def apart_contiguous(scalar_g: bool) -> Callable[..., None]:
        @njit(nogil=True)
        def formula_pass(dst, base, g, x, t, g0, us, m, cof):
            """Elements us .. us + m into dst from base on, by the formula."""
            vectors()
            for i in range(m):
                gi = g0 if scalar_g else _load(g, us + i)
                _store(dst, base + i, value(gi, _load(x, us + i), _load(t, us + i), cof))

        @njit(nogil=True)
        def element_flag_pass(dst, base, g, x, t, g0, us, m, cof):
            """The same by the twin; True where any flag was set (the tile is then redone)."""
            vectors()
            miss = False
            for i in range(m):
                gi = g0 if scalar_g else _load(g, us + i)
                v, bad = twin_value(gi, _load(x, us + i), _load(t, us + i), cof)
                if unfixed:
                    tiny = _store_or_flag(dst, base + i, v)
                    miss |= bad | tiny
                else:
                    _store(dst, base + i, v)
                    miss |= bad
            return miss

        @njit(nogil=True)
        def raw_flag_pass(dst, base, g, x, t, g0, us, m, cof):
            """element_flag_pass with a 16-bit target's flag taken from its raw patterns: set where
            any t of the tile lies outside checked_range(cof) (NaN and inf included), which holds
            every t the twin flags; the per-element flag stays for a float32 target (_bad_of)."""
            vectors()
            lo, hi = range_of(cof)
            neg, pos = _half_limits(t, lo, hi)
            hu, hs = np.uint16(0), np.int16(-32768)
            miss = False
            for i in range(m):
                gi = g0 if scalar_g else _load(g, us + i)
                v, bad = twin_value(gi, _load(x, us + i), _load(t, us + i), cof)
                hu, hs = _track(t, us + i, hu, hs)
                if unfixed:
                    tiny = _store_or_flag(dst, base + i, v)
                    miss |= _bad_of(t, bad) | tiny
                else:
                    _store(dst, base + i, v)
                    miss |= _bad_of(t, bad)
            return miss | (hu > neg) | (hs > pos)

        # A build-time choice, so that without RAW_FLAG the loop below is what it was.
        twin_pass = raw_flag_pass if raw_flags else element_flag_pass
        normal_g = scalar_g and normals

        def twin_tile(dst, base, g, x, t, g0, us, m, cof):  # pragma: no cover - the overload below, in numba
            raise NotImplementedError

        # The tile's twin pass, picked by the types the loop is compiled for: normal_run (the
        # gradient read at 0, the target from us, dst from base) where it applies, twin_pass
        # elsewhere. Inlined into the loop as the one _apart call it expands to, so a loop that
        # takes twin_pass compiles to the IR it had before normal_run existed (a pick inside one
        # pass, or a branch between two, left that IR with globals of the other's).
        @overload(twin_tile, inline="always")
        def twin_tile_impl(dst, base, g, x, t, g0, us, m, cof):
            if normal_g and _normal_types(t, dst):
                return lambda dst, base, g, x, t, g0, us, m, cof: _apart(
                    normal_run, (g, x, t, dst, np.uint64(0), us, us, base, m, cof)
                )
            return lambda dst, base, g, x, t, g0, us, m, cof: _apart(twin_pass, (dst, base, g, x, t, g0, us, m, cof))

        def loop(pg, px, pt, po, tg, tx, tt, to, n, cof64, tile, ahead, nblocks, stream):
            g, x, t, o = _view(pg, 1 if scalar_g else n, tg), _view(px, n, tx), _view(pt, n, tt), _view(po, n, to)
            cof = np.float32(cof64)
            g0 = _load(g, 0)
            chunk = _block_share(n, nblocks)
            un, uahead, own_x = np.uint64(n), np.uint64(ahead), px != pt
            for b in prange(nblocks):
                buf = np.empty(tile if stream else 0, to.dtype)
                end = min(n, (b + 1) * chunk)
                skip = 0  # tiles left that take the formula alone, after a flagged one
                for s in range(b * chunk, end, tile):
                    us, stop = np.uint64(s), np.uint64(min(s + tile, end))
                    if uahead:
                        if not scalar_g:
                            _prefetch_window(g, us + uahead, np.uint64(tile), un)
                        _prefetch_inputs(x, t, own_x, us + uahead, np.uint64(tile), un)
                    dst, base = (buf, np.uint64(0)) if stream else (o, us)
                    flagged = False
                    if skip == 0:
                        flagged = twin_tile(dst, base, g, x, t, g0, us, stop - us, cof)
                    if skip > 0 or flagged:
                        _apart(formula_pass, (dst, base, g, x, t, g0, us, stop - us, cof))
                    if stream:
                        _stream_out(buf, stop - us, o, us, po)
                    skip = _SKIP_TILES if flagged else max(skip - 1, 0)
                if stream:
                    _sfence()

        return loop

    # The walks' unit-stride runs apart too (``apart``): the strided walk's runs of at least
    # _APART_RUN elements and the transposed walk's pass (a) where its tile is one run are a call of
    # run_apart's, one function per kind of run and per value (the twin or the formula), with the
    # contiguous loops' skip after a flagged call. Inline, their loops had the exp's constants
    # reloaded on every vector, as the contiguous loop had (section 49), and the walks fell behind
    # it once it went apart. A function of one run, as the contiguous loops' passes are: with a
    # loop over a tile's runs around it, LLVM kept the constants in memory again (14 broadcasts a
    # vector in the float16 loop), and the float16 walks lost. One run apart: a broadcast row of KL
    # log_target took 0.45-0.50x the time (float32), 0.58-0.62x (bfloat16), 0.78-0.80x (float16)
    # from 512 elements up (results/performance.md, section 63).
    def run_apart(scalar_g: bool, pick: Callable[..., tuple[float, bool]], redone: bool) -> Callable[..., bool]:
        """``m`` elements of a unit-stride run from the operands' offsets into dst from ud on, each
        by ``pick`` (the twin or the flagless formula); the gradient read once at ug where
        ``scalar_g``. True where any flag was set. ``redone``: a flagged run is redone (the twin's
        pass), so its stores may flag too (_store_or_flag, where ``unfixed``); the redo's own are
        _store's."""
        unfixed_run = redone and unfixed  # a closure constant: numba prunes the other branch

        @njit(nogil=True)
        def run(g, x, t, dst, ug, ux, ut, ud, m, cof):
            vectors()
            g0 = _load(g, ug)
            miss = False
            for i in range(m):
                gi = g0 if scalar_g else _load(g, ug + i)
                v, bad = pick(gi, _load(x, ux + i), _load(t, ut + i), cof)
                if unfixed_run:
                    tiny = _store_or_flag(dst, ud + i, v)
                    miss |= bad | tiny
                else:
                    _store(dst, ud + i, v)
                    miss |= bad
            return miss

        @njit(nogil=True)
        def raw_flag_run(g, x, t, dst, ug, ux, ut, ud, m, cof):
            """run with a 16-bit target's flag from its raw patterns, as apart_contiguous's
            raw_flag_pass takes it: set where any t of the run lies outside checked_range(cof)."""
            vectors()
            lo, hi = range_of(cof)
            neg, pos = _half_limits(t, lo, hi)
            hu, hs = np.uint16(0), np.int16(-32768)
            g0 = _load(g, ug)
            miss = False
            for i in range(m):
                gi = g0 if scalar_g else _load(g, ug + i)
                v, bad = pick(gi, _load(x, ux + i), _load(t, ut + i), cof)
                hu, hs = _track(t, ut + i, hu, hs)
                if unfixed_run:
                    tiny = _store_or_flag(dst, ud + i, v)
                    miss |= _bad_of(t, bad) | tiny
                else:
                    _store(dst, ud + i, v)
                    miss |= _bad_of(t, bad)
            return miss | (hu > neg) | (hs > pos)

        # The twin's run only (the redo has no flag to take), and a build-time choice as in
        # apart_contiguous: without RAW_FLAG the runs are what they were.
        return raw_flag_run if redone and raw_flags else run

    scalar_runs = (run_apart(True, twin_value, True), run_apart(True, flagless, False))
    unit_runs = (run_apart(False, twin_value, True), run_apart(False, flagless, False))

    def twin_run(fn, args):  # pragma: no cover - replaced by the overload below inside numba
        raise NotImplementedError

    # The twin's run ``fn``, or normal_run where fn is the scalar gradient's raw flag run and the
    # types are _normal_types' (args as run_apart's: g, x, t, dst, ...), as twin_tile picks a
    # contiguous tile's pass: a call that keeps fn compiles to the IR it had before.
    @overload(twin_run, inline="always")
    def twin_run_impl(fn, args):
        normal = normals and fn.dispatcher is scalar_runs[0] and _normal_types(args.types[2], args.types[3])
        chosen = normal_run if normal else fn.dispatcher
        return lambda fn, args: _apart(chosen, args)

    @njit(inline="always")
    def apart_rows(twin_fn, formula_fn, skip, args):
        """The run ``args`` (run_apart's arguments) apart, by a kind's two run_apart functions: the
        twin's pass where ``skip`` is 0 (normal_run in its place where twin_run says), the
        formula's where the twin was not tried or flagged; the next skip, as in apart_contiguous."""
        flagged = False
        if skip == 0:
            flagged = twin_run(twin_fn, args)
        if skip > 0 or flagged:
            _apart(formula_fn, args)
        return _SKIP_TILES if flagged else max(skip - 1, 0)

    def strided_walk(run: StridedRun, apart: bool) -> Callable[..., None]:
        """The strided walk whose runs along the innermost dim are of kind ``run`` (strided_run picks
        it from the geometry's strides), a compile-time constant."""
        # One build per kind of run, each holding that one loop: with all three in one function,
        # LLVM reloaded the exp of KL log_target's constants from memory on every vector of the
        # unit-stride loops (vbroadcastss, what section 15 found in the contiguous loops), and the
        # walk took 1.2x the contiguous loop on kl_div-log 16-bit (results/performance.md, section 49).
        # Unit inner strides get loops of their own because LLVM vectorises a loop with a runtime
        # stride only by versioning it for stride 1, which a stride-0 operand (a broadcast 0-d
        # gradient) defeats, leaving the scalar loop (results/performance.md).
        scalar_g, unit = run is StridedRun.SCALAR_G, run is not StridedRun.ANY
        twin_fn, formula_fn = scalar_runs if scalar_g else unit_runs
        # ``apart`` (make_cpu_kernels' own): a unit-stride run of _APART_RUN elements or more is a
        # call of run_apart's (a shorter one lost to the call's setup: float32 runs of 32 took
        # 1.05x, bfloat16 runs of 64 1.08x; at 128 0.68x, 0.77x, float16 1.03x).
        apart_run = apart and unit

        def strided(pg, px, pt, po, tg, tx, tt, to, spans, shape, strides, n, cof64, tile, nblocks):
            # shape[nd], strides[4, nd] in elements for g, x, t, o; innermost dim last; spans[4]: the
            # elements each operand's strides reach from its first one.
            g, x, t = _view(pg, spans[0], tg), _view(px, spans[1], tx), _view(pt, spans[2], tt)
            o = _view(po, spans[3], to)
            cof = np.float32(cof64)
            nd = shape.shape[0]
            last = nd - 1
            chunk = (n + nblocks - 1) // nblocks
            for b in prange(nblocks):
                vectors()
                pos = b * chunk
                end = min(n, pos + chunk)
                idx = np.zeros(nd, np.int64)
                og = ox = ot = oo = 0
                rem = pos
                for d in range(last, -1, -1):
                    q = rem % shape[d]
                    rem //= shape[d]
                    idx[d] = q
                    og += q * strides[0, d]
                    ox += q * strides[1, d]
                    ot += q * strides[2, d]
                    oo += q * strides[3, d]
                sg, sx, st, so = strides[0, last], strides[1, last], strides[2, last], strides[3, last]
                usg, usx, ust, uso = np.uint64(sg), np.uint64(sx), np.uint64(st), np.uint64(so)
                skip = 0  # runs left that take the formula alone (apart_rows)
                while pos < end:
                    m = min(shape[last] - idx[last], end - pos, tile)
                    # Unsigned offsets (strides here are never negative) for the same reason as in flat.
                    ug, ux, ut, uo = np.uint64(og), np.uint64(ox), np.uint64(ot), np.uint64(oo)
                    if apart_run and m >= _APART_RUN:
                        skip = apart_rows(twin_fn, formula_fn, skip, (g, x, t, o, ug, ux, ut, uo, np.uint64(m), cof))
                    elif scalar_g:  # the 0-d gradient of mean/sum: read once per run, not per element
                        g0 = _load(g, ug)
                        for k in range(np.uint64(m)):
                            _store(o, uo + k, value(g0, _load(x, ux + k), _load(t, ut + k), cof))
                    elif unit:
                        for k in range(np.uint64(m)):
                            _store(o, uo + k, value(_load(g, ug + k), _load(x, ux + k), _load(t, ut + k), cof))
                    else:
                        for k in range(np.uint64(m)):
                            _store(
                                o,
                                uo + k * uso,
                                value(_load(g, ug + k * usg), _load(x, ux + k * usx), _load(t, ut + k * ust), cof),
                            )
                    pos += m
                    idx[last] += m
                    og += m * sg
                    ox += m * sx
                    ot += m * st
                    oo += m * so
                    d = last
                    while d > 0 and idx[d] == shape[d]:  # carry into the next outer dim
                        og -= shape[d] * strides[0, d]
                        ox -= shape[d] * strides[1, d]
                        ot -= shape[d] * strides[2, d]
                        oo -= shape[d] * strides[3, d]
                        idx[d] = 0
                        d -= 1
                        idx[d] += 1
                        og += strides[0, d]
                        ox += strides[1, d]
                        ot += strides[2, d]
                        oo += strides[3, d]

        return strided

    def transposed_walk(tile_bytes: int, row: int, apart: bool) -> Callable[..., None]:
        """The transposed walk with tiles of ``tile_bytes`` of out and register rows ``row``
        (Tiling.transpose_row), both compile-time constants; ``apart``: pass (a) a call of
        run_apart's where the tile is one run."""
        # Closure constants, which numba resolves as it does globals.
        block, block_nt, pair, pair_nt = _TRANSPOSES[row]
        row_bytes = _row_bytes(row)
        (twin_s, formula_s), (twin_u, formula_u) = scalar_runs, unit_runs

        def transposed(pg, px, pt, po, tg, tx, tt, to, spans, shape, strides, n, cof64, tile, nblocks, stream):
            # The strided walk of a 2-d problem whose operands disagree on the unit-stride dim: the
            # inputs step through dim 1 at stride 1, the output through dim 0 (a transposed input and a
            # contiguous out). Either order makes one side stride through memory at a power of two,
            # where every line of a column maps to the same cache set, and the strided side's loads or
            # stores stay scalar. So the problem goes in tiles of tile_bytes (16 KiB: 64 or 128 rows
            # by 64 columns; TRANSPOSED_TILES) through a buffer of out's element type: pass (a) runs the formula
            # along dim 1, the inputs' order, vectorised like flat; pass (b) moves the buffer into out
            # along dim 0 through registers, blocks one row_bytes row a side (_Transposes, _block),
            # two at a time where they can (its pair, stores in _store_order), each output column run
            # stored as whole lines (two back-to-back halves with half-line rows).
            # Each block owns a contiguous range of tiles, column strip by column strip, so its stores
            # advance along each output line run in order (round-robin tiles measured 1.3x slower;
            # results/performance.md).
            # ``stream`` (the config's knob, tiling.cpu_transposed_space, where the launch finds out's
            # lines aligned): those whole-line stores are non-temporal. Every tile writes a line or two
            # into each of 64 rows a power of two apart, too many streams for the hardware prefetcher,
            # so each ordinary store waited on reading its line in first; a streamed line skips that
            # read (results/performance.md, section 17).
            g, x, t = _view(pg, spans[0], tg), _view(px, spans[1], tx), _view(pt, spans[2], tt)
            o = _view(po, spans[3], to)
            cof = np.float32(cof64)
            rows, cols = np.uint64(shape[0]), np.uint64(shape[1])
            tr, tc = np.uint64(tile_bytes // _TILE_COLS // o.itemsize), np.uint64(_TILE_COLS)
            one = np.uint64(1)
            row_tiles, col_tiles = (rows + tr - one) // tr, (cols + tc - one) // tc
            # Unsigned offsets, as in flat (strides here are never negative).
            so1 = np.uint64(strides[3, 1])  # out steps through dim 0 at stride 1 (the launch checks)
            sg0, sx0, st0 = np.uint64(strides[0, 0]), np.uint64(strides[1, 0]), np.uint64(strides[2, 0])
            sg1, sx1, st1 = np.uint64(strides[0, 1]), np.uint64(strides[1, 1]), np.uint64(strides[2, 1])
            unit = sx1 == 1 and st1 == 1
            for b in prange(nblocks):
                vectors()
                buf = np.empty(tile_bytes // o.itemsize, to.dtype)
                ntiles = row_tiles * col_tiles
                share = (ntiles + np.uint64(nblocks) - one) // np.uint64(nblocks)
                skip = 0  # whole tiles left that take the formula alone (apart_rows)
                for tile_no in range(np.uint64(b) * share, min(ntiles, (np.uint64(b) + one) * share)):
                    # Index math stays in uint64 throughout: numba types int64 (op) uint64 as float64.
                    r0, c0 = (np.uint64(tile_no) % row_tiles) * tr, (np.uint64(tile_no) // row_tiles) * tc
                    nr, nc = min(rows - r0, tr), min(cols - c0, tc)
                    # (a): the formula into the buffer, rows nc apart, one unit-stride run per tile row.
                    # Where the tile's rows follow one another in memory for every operand (inputs at
                    # most 64 wide) the whole tile is one run of nr * nc.
                    ug, ux, ut = r0 * sg0 + c0 * sg1, r0 * sx0 + c0 * sx1, r0 * st0 + c0 * st1
                    g_dense = (sg0 == 0 and sg1 == 0) or (sg0 == nc and sg1 == 1)
                    if unit and sx0 == nc and st0 == nc and g_dense:
                        runs, run = one, nr * nc
                    else:
                        runs, run = nr, nc
                    if apart and runs == one and unit and sg1 <= one:  # one run, every operand at unit stride or g at 0
                        args = (g, x, t, buf, ug, ux, ut, np.uint64(0), run, cof)
                        if sg1 == 0:
                            skip = apart_rows(twin_s, formula_s, skip, args)
                        else:
                            skip = apart_rows(twin_u, formula_u, skip, args)
                    else:
                        for r in range(runs):
                            rg, rx, rt, rb = ug + r * sg0, ux + r * sx0, ut + r * st0, r * nc
                            # Unit-stride loops of their own, as in strided (a stride-0 gradient would
                            # keep LLVM from vectorising a runtime-stride loop).
                            if unit and sg1 == 0:
                                g0 = _load(g, rg)
                                for c in range(run):
                                    _store(buf, rb + c, value(g0, _load(x, rx + c), _load(t, rt + c), cof))
                            elif unit and sg1 == 1:
                                for c in range(run):
                                    gi = _load(g, rg + c)
                                    _store(buf, rb + c, value(gi, _load(x, rx + c), _load(t, rt + c), cof))
                            else:
                                for c in range(run):
                                    gi, xi, ti = _load(g, rg + c * sg1), _load(x, rx + c * sx1), _load(t, rt + c * st1)
                                    _store(buf, rb + c, value(gi, xi, ti, cof))
                    # (b): whole blocks through registers, two at a time and then a last odd one, then
                    # the ragged edges element by element.
                    block_cols = block_rows = np.uint64(row_bytes // o.itemsize)  # _block(itemsize, row_bytes)
                    nr_whole, nc_whole = nr // block_rows * block_rows, nc // block_cols * block_cols
                    pair_rows = np.uint64(2) * block_rows
                    nr_pairs = nr_whole // pair_rows * pair_rows
                    for c in range(np.uint64(0), nc_whole, block_cols):
                        for r in range(np.uint64(0), nr_pairs, pair_rows):
                            if stream:
                                pair_nt(buf, r * nc + c, nc, o, (c0 + c) * so1 + r0 + r, so1)
                            else:
                                pair(buf, r * nc + c, nc, o, (c0 + c) * so1 + r0 + r, so1)
                        for r in range(nr_pairs, nr_whole, block_rows):
                            if stream:
                                block_nt(buf, r * nc + c, nc, o, (c0 + c) * so1 + r0 + r, so1)
                            else:
                                block(buf, r * nc + c, nc, o, (c0 + c) * so1 + r0 + r, so1)
                    for c in range(nc):
                        for r in range(nr_whole if c < nc_whole else np.uint64(0), nr):
                            o[(c0 + c) * so1 + r0 + r] = buf[r * nc + c]
                if stream:
                    _sfence()

        return transposed

    def transposed_in_walk(tile_bytes: int, row: int) -> Callable[..., None]:
        """The transposed walk in the other order (Tiling.transpose_in), for a formula that reads
        the target alone with a 0-d gradient (KL with mean/sum; the space offers it only there):
        pass (a') moves the target's tile through the register transposes into a buffer in out's
        order, pass (b') runs the formula along each of out's rows, from the buffer into out. One
        operand is transposed either way, but out's scattered stores now come from the formula's
        vectorised loop, whose conversions hide them, where the shipped order issues them from the
        transposes, which share those conversions' pipes on Zen 4 (results/performance.md, section
        42). Same tiles, blocks and ragged edges as ``transposed``; bitwise the same result."""
        block, _, pair, _ = _TRANSPOSES[row]
        row_bytes = _row_bytes(row)

        def transposed_in(pg, px, pt, po, tg, tx, tt, to, spans, shape, strides, n, cof64, tile, nblocks, stream):
            # shape, strides and tiles as in transposed: the target steps through dim 1, out through
            # dim 0; the buffer holds a tile of the target's type, column c's nr rows at c * nr.
            g, t = _view(pg, spans[0], tg), _view(pt, spans[2], tt)
            o = _view(po, spans[3], to)
            cof = np.float32(cof64)
            rows, cols = np.uint64(shape[0]), np.uint64(shape[1])
            tr, tc = np.uint64(tile_bytes // _TILE_COLS // o.itemsize), np.uint64(_TILE_COLS)
            one = np.uint64(1)
            row_tiles, col_tiles = (rows + tr - one) // tr, (cols + tc - one) // tc
            so1, st0, st1 = np.uint64(strides[3, 1]), np.uint64(strides[2, 0]), np.uint64(strides[2, 1])
            g0 = _load(g, 0)
            for b in prange(nblocks):
                vectors()
                buf = np.empty(tile_bytes // o.itemsize, tt.dtype)
                line = np.empty(tr if stream else np.uint64(0), to.dtype)  # one row's run, streamed out
                ntiles = row_tiles * col_tiles
                share = (ntiles + np.uint64(nblocks) - one) // np.uint64(nblocks)
                for tile_no in range(np.uint64(b) * share, min(ntiles, (np.uint64(b) + one) * share)):
                    r0, c0 = (np.uint64(tile_no) % row_tiles) * tr, (np.uint64(tile_no) // row_tiles) * tc
                    nr, nc = min(rows - r0, tr), min(cols - c0, tc)
                    at = r0 * st0 + c0 * st1
                    # (a'): whole blocks of the target through registers, pairs then a last odd one
                    # (the target's own element width sets the block), then the ragged edges.
                    side = np.uint64(row_bytes // t.itemsize)
                    nr_whole = nr // side * side if st1 == one else np.uint64(0)
                    nc_whole = nc // side * side if st1 == one else np.uint64(0)
                    nr_pairs = nr_whole // (np.uint64(2) * side) * (np.uint64(2) * side)
                    for c in range(np.uint64(0), nc_whole, side):
                        for r in range(np.uint64(0), nr_pairs, np.uint64(2) * side):
                            pair(t, at + r * st0 + c, st0, buf, c * nr + r, nr)
                        for r in range(nr_pairs, nr_whole, side):
                            block(t, at + r * st0 + c, st0, buf, c * nr + r, nr)
                    for c in range(nc):
                        for r in range(nr_whole if c < nc_whole else np.uint64(0), nr):
                            buf[c * nr + r] = t[at + r * st0 + c * st1]
                    # (b'): the formula along each of out's nc rows, a run of nr elements; the
                    # target stands in for self, which the formula does not read.
                    for c in range(nc):
                        base, start = c * nr, (c0 + c) * so1 + r0
                        if stream:
                            for r in range(nr):
                                _store(line, r, value(g0, _load(buf, base + r), _load(buf, base + r), cof))
                            _stream_out(line, nr, o, start, po)
                        else:
                            for r in range(nr):
                                _store(o, start + r, value(g0, _load(buf, base + r), _load(buf, base + r), cof))
                if stream:
                    _sfence()

        return transposed_in

    @njit(inline="always")
    def formula_rows(g, x, t, buf, ug, ux, ut, rb, sg0, sx0, st0, sg1, sx1, st1, runs, run, nc, unit, cof):
        # The transposed walk's pass (a), as in transposed: ``runs`` runs of ``run`` elements, run r
        # from the operands' offsets plus r times their row strides into buf from rb + r * nc.
        for r in range(runs):
            rg, rx, rt, rr = ug + r * sg0, ux + r * sx0, ut + r * st0, rb + r * nc
            if unit and sg1 == 0:
                g0 = _load(g, rg)
                for c in range(run):
                    _store(buf, rr + c, value(g0, _load(x, rx + c), _load(t, rt + c), cof))
            elif unit and sg1 == 1:
                for c in range(run):
                    _store(buf, rr + c, value(_load(g, rg + c), _load(x, rx + c), _load(t, rt + c), cof))
            else:
                for c in range(run):
                    gi, xi, ti = _load(g, rg + c * sg1), _load(x, rx + c * sx1), _load(t, rt + c * st1)
                    _store(buf, rr + c, value(gi, xi, ti, cof))

    def kind_rows(kind: StridedRun) -> Callable[..., None]:
        """formula_rows for runs of one kind (transposed_run), a compile-time constant: the same
        loops, and the same arguments (``unit`` unread), each build holding one of them."""
        scalar_g, unit_run = kind is StridedRun.SCALAR_G, kind is not StridedRun.ANY

        @njit(inline="always")
        def rows(g, x, t, buf, ug, ux, ut, rb, sg0, sx0, st0, sg1, sx1, st1, runs, run, nc, unit, cof):
            for r in range(runs):
                rg, rx, rt, rr = ug + r * sg0, ux + r * sx0, ut + r * st0, rb + r * nc
                if scalar_g:
                    g0 = _load(g, rg)
                    for c in range(run):
                        _store(buf, rr + c, value(g0, _load(x, rx + c), _load(t, rt + c), cof))
                elif unit_run:
                    for c in range(run):
                        _store(buf, rr + c, value(_load(g, rg + c), _load(x, rx + c), _load(t, rt + c), cof))
                else:
                    for c in range(run):
                        gi, xi, ti = _load(g, rg + c * sg1), _load(x, rx + c * sx1), _load(t, rt + c * st1)
                        _store(buf, rr + c, value(gi, xi, ti, cof))

        return rows

    # The deferred walk's whole dense tile through the twin (``deferred_twin``): pass (a)'s nc
    # pieces by normal_run's loop, inline, the held tile's out row j stored after piece j as the
    # formula's pieces do. Inline because the deferred order gains by hiding those stores behind
    # the piece loop: a call of the twin's run apart per piece, or per group of pieces with their
    # rows stored after it, lost 1.13-1.40x at 2^22 (results/performance.md, section 105), and a
    # call per whole tile with the rows stored inside it 1.03-1.05x at 2^20-2^24 (section 106),
    # where inline the walk took 0.93-0.97x the time (LLVM kept all but two of the exp's constants
    # in registers: two broadcasts from memory and one reload a 64-element step).
    def twin_pieces(g, x, t, buf, held, o, ug, ux, ut, tr, tc, hstart, so1, stream, cof):
        """A whole dense tile of ``tc`` pieces of ``tr`` elements from the operands' offsets (its
        one-value gradient at ug) into buf by normal_run's loop, the held tile's row j stored into
        out from hstart + j * so1 after piece j; 1 where the tile's flag is set, else 0."""
        g0 = _load(g, ug)
        lo, hi = range_of(cof)
        lo = max(lo, low_of(cof, g0))
        neg, pos = _half_limits(t, lo, hi)
        hu, hs = np.uint16(0), np.int16(-32768)
        step = np.uint64(LINE // o.itemsize)
        for j in range(tc):
            at = j * tr
            for c in range(tr):
                v, _ = twin_value(g0, _load(x, ux + at + c), _load(t, ut + at + c), cof)
                hu, hs = _track(t, ut + at + c, hu, hs)
                _store_unfixed(buf, at + c, v)
            src, dst = j * tr, hstart + j * so1
            if stream:
                for i in range(np.uint64(0), tr, step):
                    _stream_line(held, src + i, o, dst + i)
            else:
                for i in range(tr):
                    o[dst + i] = held[src + i]
        return np.uint8(1) if (hu > neg) | (hs > pos) | (lo >= np.float32(0.0)) else np.uint8(0)

    # (Replaced by the overload below inside numba.)
    def whole_twin(g, x, t, buf, held, o, ug, ux, ut, tr, tc, hstart, so1, stream, cof):  # pragma: no cover
        raise NotImplementedError

    # twin_pieces where the types are _normal_types' (its store is normal_run's), picked while the
    # walk is typed: 0 the tile's values are in buf and its held rows out, 1 the same but a flag was
    # set (buf is redone by the formula), 2 not taken (the formula's pieces run as before).
    @overload(whole_twin, inline="always")
    def whole_twin_impl(g, x, t, buf, held, o, ug, ux, ut, tr, tc, hstart, so1, stream, cof):
        if normals and _normal_types(t, buf):
            return twin_pieces
        return lambda g, x, t, buf, held, o, ug, ux, ut, tr, tc, hstart, so1, stream, cof: np.uint8(2)

    def transposed_deferred_walk(tile_bytes: int, row: int, kind: StridedRun | None) -> Callable[..., None]:
        """The transposed walk with out's stores deferred (Tiling.defer_out): pass (b) transposes
        the tile into a second L1 buffer in out's order, and its out rows are stored during the
        next tile's pass (a), one row after each of that pass's nc runs of nr elements. The
        shipped walk issues them from the transposes, which share Zen 4's vector pipes with the
        conversions; from the formula's vectorised loop they hide behind its conversions, as the
        contiguous loop's own stores do (results/performance.md, section 43). Same tiles, blocks
        and ragged edges as ``transposed``, bitwise the same result; a tile that is not whole, or
        follows one that is not, is stored before the next pass (a) starts.
        ``kind``: the kind of pass (a)'s runs (transposed_run) this build takes alone, or None for a
        build that takes every kind and picks per run."""
        block, _, pair, _ = _TRANSPOSES[row]
        row_bytes = _row_bytes(row)
        # With the three kinds of run in one function LLVM reloaded the exp's constants on every
        # vector of pass (a), as in the strided walk (results/performance.md, sections 49 and 50).
        # The general build (ANY) checks the gradient's stride at run time, as the one build does,
        # so that it stays valid for every geometry.
        pass_a = formula_rows if kind is None else kind_rows(kind)
        any_g, scalar_g = kind in (None, StridedRun.ANY), kind is StridedRun.SCALAR_G
        # A closure constant: numba prunes the twin's branch from every other build, whose IR (and
        # so every table entry tuned on it: tuner.restamp) stays what it was.
        twin = deferred_twin and normals and scalar_g

        def transposed_deferred(pg, px, pt, po, tg, tx, tt, to, spans, shape, strides, n, cof64, tile, nblocks, stream):
            # shape, strides and tiles as in transposed.
            g, x, t = _view(pg, spans[0], tg), _view(px, spans[1], tx), _view(pt, spans[2], tt)
            o = _view(po, spans[3], to)
            cof = np.float32(cof64)
            rows, cols = np.uint64(shape[0]), np.uint64(shape[1])
            tr, tc = np.uint64(tile_bytes // _TILE_COLS // o.itemsize), np.uint64(_TILE_COLS)
            one, zero = np.uint64(1), np.uint64(0)
            row_tiles, col_tiles = (rows + tr - one) // tr, (cols + tc - one) // tc
            so1 = np.uint64(strides[3, 1])
            sg0, sx0, st0 = np.uint64(strides[0, 0]), np.uint64(strides[1, 0]), np.uint64(strides[2, 0])
            sg1, sx1, st1 = np.uint64(strides[0, 1]), np.uint64(strides[1, 1]), np.uint64(strides[2, 1])
            unit = sx1 == 1 and st1 == 1
            step = np.uint64(LINE // o.itemsize)  # elements per line
            for b in prange(nblocks):
                vectors()
                buf = np.empty(tile_bytes // o.itemsize, to.dtype)
                held = np.empty(tile_bytes // o.itemsize, to.dtype)  # the last tile, out's order
                hnc = hnr = hstart = zero  # its out rows, their length, where the first goes
                skip = 0  # whole tiles left that take the formula alone, after a flagged one (twin)
                ntiles = row_tiles * col_tiles
                share = (ntiles + np.uint64(nblocks) - one) // np.uint64(nblocks)
                for tile_no in range(np.uint64(b) * share, min(ntiles, (np.uint64(b) + one) * share)):
                    r0, c0 = (np.uint64(tile_no) % row_tiles) * tr, (np.uint64(tile_no) // row_tiles) * tc
                    nr, nc = min(rows - r0, tr), min(cols - c0, tc)
                    ug, ux, ut = r0 * sg0 + c0 * sg1, r0 * sx0 + c0 * sx1, r0 * st0 + c0 * st1
                    g_dense = (sg0 == 0 and sg1 == 0) or (sg0 == nc and sg1 == 1)
                    dense = unit and sx0 == nc and st0 == nc and g_dense
                    whole = dense and nr == tr and nc == tc and hnc == tc and hnr == tr
                    status = np.uint8(2)
                    if twin:
                        if whole and skip == 0:
                            status = whole_twin(g, x, t, buf, held, o, ug, ux, ut, tr, tc, hstart, so1, stream, cof)
                        if status == 1:  # the held rows are out; buf again, by the formula (one run)
                            area = tr * tc
                            pass_a(
                                g, x, t, buf, ug, ux, ut, zero, sg0, sx0, st0, sg1, sx1, st1, one, area, tc, unit, cof
                            )
                        if whole:
                            skip = _SKIP_TILES if status == 1 else max(skip - 1, 0)
                    if status != 2:
                        pass
                    elif whole:
                        # (a) in nc pieces of nr elements (the tile is one run), the held tile's
                        # out row j stored after piece j. Written out here rather than through
                        # formula_rows and _rows_out: that form took 1.03-1.16x this one's time.
                        g0 = _load(g, ug)
                        for j in range(tc):
                            at = j * tr
                            if scalar_g or (any_g and sg1 == 0):
                                for c in range(tr):
                                    _store(buf, at + c, value(g0, _load(x, ux + at + c), _load(t, ut + at + c), cof))
                            else:
                                for c in range(tr):
                                    gi = _load(g, ug + at + c)
                                    _store(buf, at + c, value(gi, _load(x, ux + at + c), _load(t, ut + at + c), cof))
                            src, dst = j * tr, hstart + j * so1
                            if stream:
                                for i in range(zero, tr, step):
                                    _stream_line(held, src + i, o, dst + i)
                            else:
                                for i in range(tr):
                                    o[dst + i] = held[src + i]
                    else:
                        _rows_out(held, zero, hnc, hnr, o, hstart, so1, stream)
                        runs, run = (one, nr * nc) if dense else (nr, nc)
                        pass_a(g, x, t, buf, ug, ux, ut, zero, sg0, sx0, st0, sg1, sx1, st1, runs, run, nc, unit, cof)
                    # (b): the tile into held through registers, column c's nr rows at c * nr.
                    side = np.uint64(row_bytes // o.itemsize)  # _block(itemsize, row_bytes)
                    nr_whole, nc_whole = nr // side * side, nc // side * side
                    nr_pairs = nr_whole // (np.uint64(2) * side) * (np.uint64(2) * side)
                    for c in range(zero, nc_whole, side):
                        for r in range(zero, nr_pairs, np.uint64(2) * side):
                            pair(buf, r * nc + c, nc, held, c * nr + r, nr)
                        for r in range(nr_pairs, nr_whole, side):
                            block(buf, r * nc + c, nc, held, c * nr + r, nr)
                    for c in range(nc):
                        for r in range(nr_whole if c < nc_whole else zero, nr):
                            held[c * nr + r] = buf[r * nc + c]
                    hnc, hnr, hstart = nc, nr, c0 * so1 + r0
                _rows_out(held, zero, hnc, hnr, o, hstart, so1, stream)
                if stream:
                    _sfence()

        return transposed_deferred

    @njit(inline="always")
    def staged_value(sgv, sxv, stv, gb, xb, tb, i, at, rs, x_is_t, cof):
        """The blocked reduce walk's value of lane i's term at ``at`` in the buffers: each operand
        from its buffer, or at stride 0 along the run from its lane's staged first value. ``rs``:
        the operands' strides along the run, (g, x, t). (The arrays go one by one: packed into a
        tuple, each call counted their references, and the walk took 70x longer.)"""
        rsg, rsx, rst = rs
        gi = sgv[i] if rsg == 0 else _load(gb, at + i)
        ti = stv[i] if rst == 0 else _load(tb, at + i)
        xi = ti if x_is_t else (sxv[i] if rsx == 0 else _load(xb, at + i))
        return value(gi, xi, ti, cof)

    # The reduce walk's unit-stride lanes (a run of the innermost kept dim, KL's summed layout):
    # a block's sums by ``pick``, the twin (checked) or the flagless formula. With the twin, a
    # flagged block is summed again by the formula, from zero, as the contiguous loops redo a tile
    # (same skip after it): its terms are then the formula's bits, as every unflagged term is
    # already, so each output's sum is the formula's, whatever the config. The clamps and the zero
    # the twin leaves out are three of a term's vector operations where the exp's arithmetic bounds
    # the walk (results/performance.md, section 88).
    def lane_sums(pick: Callable[..., tuple[float, bool]], scalar_g: bool) -> Callable[..., bool]:
        @njit(inline="always")
        def sums(g, x, t, acc, comp, um, base, steps, nouter, rshape, rstrides, nr, uwhole, urun, cof):
            """The sums of ``um`` lanes from ``base`` offsets (g, x, t) into acc and comp (from
            zero), ``steps`` their strides along the innermost summed dim; True where any term's
            flag was set."""
            bg, bx, bt = base
            rg, rx, rt = steps
            for i in range(um):
                acc[i] = np.float32(0.0)
                comp[i] = np.float32(0.0)
            uterms = np.uint64(REDUCE_TERMS)
            miss = False
            for ro in range(nouter):
                og, ox, ot = _summed_at(ro, bg, bx, bt, rshape, rstrides, nr - 1)
                # A group's terms per pass over the lanes, each lane's sum and compensation in
                # registers across them: one load and one store of each per group, where a pass
                # per term loaded and stored both for every term (results/performance.md, section 55).
                for p in range(np.uint64(0), uwhole, uterms):
                    g0, x0, t0 = og + p * rg, ox + p * rx, ot + p * rt
                    g1, x1, t1 = g0 + rg, x0 + rx, t0 + rt
                    g2, x2, t2 = g1 + rg, x1 + rx, t1 + rt
                    g3, x3, t3 = g2 + rg, x2 + rx, t2 + rt
                    sg0, sg1, sg2, sg3 = _load(g, g0), _load(g, g1), _load(g, g2), _load(g, g3)
                    for i in range(um):
                        gi = sg0 if scalar_g else _load(g, g0 + i)
                        v, b0 = pick(gi, _load(x, x0 + i), _load(t, t0 + i), cof)
                        gi = sg1 if scalar_g else _load(g, g1 + i)
                        w, b1 = pick(gi, _load(x, x1 + i), _load(t, t1 + i), cof)
                        v += w
                        gi = sg2 if scalar_g else _load(g, g2 + i)
                        w, b2 = pick(gi, _load(x, x2 + i), _load(t, t2 + i), cof)
                        v += w
                        gi = sg3 if scalar_g else _load(g, g3 + i)
                        w, b3 = pick(gi, _load(x, x3 + i), _load(t, t3 + i), cof)
                        v += w
                        miss |= b0 | b1 | b2 | b3
                        acc[i], comp[i] = _kahan(acc[i], comp[i], v)
                for p in range(uwhole, urun):
                    ug, ux, ut = og + p * rg, ox + p * rx, ot + p * rt
                    sg0 = _load(g, ug)
                    for i in range(um):
                        gi = sg0 if scalar_g else _load(g, ug + i)
                        v, b0 = pick(gi, _load(x, ux + i), _load(t, ut + i), cof)
                        miss |= b0
                        acc[i], comp[i] = _kahan(acc[i], comp[i], v)
            return miss

        return sums

    def reduce_walk(kind: StridedRun) -> Callable[..., None]:
        """The reduce walk for lanes of one kind (reduce_run), a compile-time constant as in
        strided_walk: each build holds one of the three lane loops."""
        scalar_g, unit_run = kind is StridedRun.SCALAR_G, kind is not StridedRun.ANY
        twin_sums, formula_sums = lane_sums(twin_value, scalar_g), lane_sums(flagless, scalar_g)
        block = _TRANSPOSES[REDUCE_ROW].block
        row_bytes = _row_bytes(REDUCE_ROW)

        def reduce(
            pg, px, pt, po, tg, tx, tt, to, spans, kshape, kstrides, rshape, rstrides, n_out, cof64, tile, nblocks
        ):
            # Each output element sums its broadcast dims in ascending linear order, whatever the
            # tiling: the result is bitwise the same for every config. Kahan keeps float32 accurate.
            # The outputs go up to ``tile`` at a time, one run of the innermost kept dim, as lanes:
            # the summed dims' loop outside, the lanes' loop inside, each lane its own accumulator.
            # Every lane then takes the steps it took alone, in the same order (the same bits), but
            # a step is a vector over independent sums. One output at a time, each Kahan step
            # waited on the last one's four dependent adds, and every summed element paid the
            # odometer's divisions: 19-51x the contiguous case's time at 2^22, slower than
            # PyTorch's eager expression and sum (results/performance.md, section 51).
            g, x, t = _view(pg, spans[0], tg), _view(px, spans[1], tx), _view(pt, spans[2], tt)
            o = _view(po, spans[3], to)
            cof = np.float32(cof64)
            nk, nr = kshape.shape[0], rshape.shape[0]
            last = nk - 1
            nred = 1
            for d in range(nr):
                nred *= rshape[d]
            usg, usx, ust = np.uint64(kstrides[0, last]), np.uint64(kstrides[1, last]), np.uint64(kstrides[2, last])
            so = kstrides[3, last]
            # Strided lanes over a summed run at stride 0 or 1 in every operand, of at least one
            # transpose's side: the blocked lanes (REDUCE_BLOCK_LANES). A self that is the target
            # (a formula that never reads it is handed the target twice) is staged once, as target.
            rl = nr - 1
            run = rshape[rl]
            rsg, rsx, rst = rstrides[0, rl], rstrides[1, rl], rstrides[2, rl]
            rs = (rsg, rsx, rst)  # staged_value's strides (ints only: arrays go one by one)
            side = np.uint64(row_bytes // t.itemsize)
            x_is_t = px == pt and kstrides[1, last] == kstrides[2, last]
            for d in range(nr):
                x_is_t = x_is_t and rstrides[1, d] == rstrides[2, d]
            blocked = (
                not unit_run
                and run >= side
                and g.itemsize == t.itemsize
                and x.itemsize == t.itemsize
                and (rsg == 0 or rsg == 1)
                and (rsx == 0 or rsx == 1)
                and (rst == 0 or rst == 1)
            )
            ulanes = np.uint64(REDUCE_BLOCK_LANES)
            nbuf = side * ulanes if blocked else np.uint64(0)
            # The twin's lanes where the gradient is at stride 0 along them (SCALAR_G: a 0-d one)
            # or 16-bit, not a float32 gradient read lane by lane (a constant of the build's kind and
            # types, so LLVM drops the other branch): that loop reads two float32 streams a term,
            # and with the twin's flag it spilled and took 1.09x the formula's time, where the
            # others took 0.77-0.89x (section 88).
            twin_lanes = scalar_g or _sixteen(g)
            nouter = nred // run
            nchunks = (np.uint64(run) + side - np.uint64(1)) // side
            last_p0 = np.uint64(run) - side  # used only where run >= side (blocked)
            # Each run's terms in groups of REDUCE_TERMS from its start, then the rest one by one.
            urun, uterms = np.uint64(run), np.uint64(REDUCE_TERMS)
            uwhole = urun // uterms * uterms
            rg, rx, rt = np.uint64(rsg), np.uint64(rsx), np.uint64(rst)
            steps = (rg, rx, rt)
            chunk = (n_out + nblocks - 1) // nblocks
            for b in prange(nblocks):
                _wide_vectors()  # the sums are bound by arithmetic, not memory, in every formula
                acc = np.empty(tile, np.float32)
                comp = np.empty(tile, np.float32)
                part = np.empty(0 if unit_run or blocked else tile, np.float32)
                sgv = np.empty(0 if unit_run else tile, np.float32)
                sxv = np.empty(0 if unit_run else tile, np.float32)
                stv = np.empty(0 if unit_run else tile, np.float32)
                gb, xb, tb = np.empty(nbuf, tg.dtype), np.empty(nbuf, tx.dtype), np.empty(nbuf, tt.dtype)
                pos = b * chunk
                end = min(n_out, pos + chunk)
                skip = 0  # blocks of unit-stride lanes left that take the formula alone
                while pos < end:
                    first, bg, bx, bt, bo = _kept_at(pos, kshape, kstrides)
                    m = min(kshape[last] - first, end - pos, tile)
                    if m == 1:  # one lane (a kept dim of one): its sum in registers, not in acc
                        s1 = np.float32(0.0)
                        c1 = np.float32(0.0)
                        for ro in range(nouter):
                            og, ox, ot = _summed_at(ro, bg, bx, bt, rshape, rstrides, nr - 1)
                            for p0 in range(np.uint64(0), uwhole, uterms):
                                v1 = np.float32(0.0)
                                for p in range(p0, p0 + uterms):
                                    v = value(_load(g, og + p * rg), _load(x, ox + p * rx), _load(t, ot + p * rt), cof)
                                    v1 = v if p == p0 else np.float32(v1 + v)
                                s1, c1 = _kahan(s1, c1, v1)
                            for p in range(uwhole, urun):
                                v = value(_load(g, og + p * rg), _load(x, ox + p * rx), _load(t, ot + p * rt), cof)
                                s1, c1 = _kahan(s1, c1, v)
                        _store(o, bo, s1)
                        pos += 1
                        continue
                    if blocked:
                        # Blocks of lanes: for each run of the innermost summed dim, side x side
                        # elements of an operand at a time through the register transposes into
                        # its buffer, element j of lane i at j * REDUCE_BLOCK_LANES + i; each lane's
                        # first value is loaded once per run, as float32, for the operands at
                        # stride 0 along it.
                        # Then the groups' Kahan steps as below, in ascending order. (Lanes
                        # outside, terms inside, to keep each sum in registers: LLVM vectorises
                        # only the innermost loop, and the walk took 1.4-33x longer.)
                        for l0 in range(0, m, REDUCE_BLOCK_LANES):
                            lm = np.uint64(min(REDUCE_BLOCK_LANES, m - l0))
                            lwhole = lm // side * side
                            for i in range(lm):
                                acc[i] = np.float32(0.0)
                                comp[i] = np.float32(0.0)
                            for ro in range(nouter):
                                ug, ux, ut = _summed_at(
                                    ro,
                                    bg + l0 * kstrides[0, last],
                                    bx + l0 * kstrides[1, last],
                                    bt + l0 * kstrides[2, last],
                                    rshape,
                                    rstrides,
                                    nr - 1,
                                )
                                for i in range(lm):
                                    sgv[i] = _load(g, ug + i * usg)
                                    sxv[i] = _load(x, ux + i * usx)
                                    stv[i] = _load(t, ut + i * ust)
                                for k in range(nchunks):
                                    # The run's last chunk, where the run is not a whole number of
                                    # sides, ends at the run's end and overlaps the one before it:
                                    # its first j0 terms are summed there already. Chunks start at
                                    # multiples of side, a multiple of REDUCE_TERMS: a group never
                                    # straddles two.
                                    p0 = min(k * side, last_p0)
                                    j0 = k * side - p0
                                    if rsg == 1:
                                        for i0 in range(np.uint64(0), lwhole, side):
                                            block(g, ug + p0 + i0 * usg, usg, gb, i0, ulanes)
                                        _stage_ragged(g, gb, ug + p0, usg, lwhole, lm, side, ulanes)
                                    if rsx == 1 and not x_is_t:
                                        for i0 in range(np.uint64(0), lwhole, side):
                                            block(x, ux + p0 + i0 * usx, usx, xb, i0, ulanes)
                                        _stage_ragged(x, xb, ux + p0, usx, lwhole, lm, side, ulanes)
                                    if rst == 1:
                                        for i0 in range(np.uint64(0), lwhole, side):
                                            block(t, ut + p0 + i0 * ust, ust, tb, i0, ulanes)
                                        _stage_ragged(t, tb, ut + p0, ust, lwhole, lm, side, ulanes)
                                    j = j0
                                    while j + uterms <= side:
                                        a0 = j * ulanes
                                        a1 = a0 + ulanes
                                        a2 = a1 + ulanes
                                        a3 = a2 + ulanes
                                        for i in range(lm):
                                            v = staged_value(sgv, sxv, stv, gb, xb, tb, i, a0, rs, x_is_t, cof)
                                            v += staged_value(sgv, sxv, stv, gb, xb, tb, i, a1, rs, x_is_t, cof)
                                            v += staged_value(sgv, sxv, stv, gb, xb, tb, i, a2, rs, x_is_t, cof)
                                            v += staged_value(sgv, sxv, stv, gb, xb, tb, i, a3, rs, x_is_t, cof)
                                            acc[i], comp[i] = _kahan(acc[i], comp[i], v)
                                        j += uterms
                                    while j < side:  # the run's last terms, in its last chunk
                                        a0 = j * ulanes
                                        for i in range(lm):
                                            v = staged_value(sgv, sxv, stv, gb, xb, tb, i, a0, rs, x_is_t, cof)
                                            acc[i], comp[i] = _kahan(acc[i], comp[i], v)
                                        j += np.uint64(1)
                            for i in range(lm):
                                _store(o, bo + (l0 + np.int64(i)) * so, acc[i])
                        pos += m
                        continue
                    um = np.uint64(m)
                    if unit_run:
                        base = (bg, bx, bt)
                        flagged = False
                        if twin_lanes and skip == 0:
                            flagged = twin_sums(
                                g, x, t, acc, comp, um, base, steps, nouter, rshape, rstrides, nr, uwhole, urun, cof
                            )
                        if not twin_lanes or skip > 0 or flagged:
                            formula_sums(
                                g, x, t, acc, comp, um, base, steps, nouter, rshape, rstrides, nr, uwhole, urun, cof
                            )
                        skip = _SKIP_TILES if flagged else max(skip - 1, 0)
                    else:
                        for i in range(um):
                            acc[i] = np.float32(0.0)
                            comp[i] = np.float32(0.0)
                        for ro in range(nouter):
                            og, ox, ot = _summed_at(ro, bg, bx, bt, rshape, rstrides, nr - 1)
                            # Strided lanes: their values staged in float32 first, then summed as
                            # one vector loop. Loaded inside the sum, float16 lanes took 1.2-7x the
                            # time of float32 ones (LLVM converted each strided half on its own).
                            # A group's sum goes through ``part``, one term at a time.
                            for p in range(np.uint64(0), urun):
                                ug, ux, ut = og + p * rg, ox + p * rx, ot + p * rt
                                for i in range(um):
                                    sgv[i] = _load(g, ug + i * usg)
                                    sxv[i] = _load(x, ux + i * usx)
                                    stv[i] = _load(t, ut + i * ust)
                                if p >= uwhole:
                                    for i in range(um):
                                        v = value(sgv[i], sxv[i], stv[i], cof)
                                        acc[i], comp[i] = _kahan(acc[i], comp[i], v)
                                elif p % uterms == 0:
                                    for i in range(um):
                                        part[i] = value(sgv[i], sxv[i], stv[i], cof)
                                elif p % uterms != uterms - np.uint64(1):
                                    for i in range(um):
                                        part[i] += value(sgv[i], sxv[i], stv[i], cof)
                                else:
                                    for i in range(um):
                                        v = part[i] + value(sgv[i], sxv[i], stv[i], cof)
                                        acc[i], comp[i] = _kahan(acc[i], comp[i], v)
                    for i in range(m):
                        _store(o, bo + i * so, acc[i])
                    pos += m

        return reduce

    def reduce_along_walk(scalar_g: bool) -> Callable[..., None]:
        """The reduce walk along the summed dims, for geometries whose innermost summed dim is a
        unit-stride run of target and whose sums are long (reduce_along): the gradient at stride 0 along it
        (``scalar_g``, a compile-time constant) or at unit stride."""

        def reduce_along(
            pg, px, pt, po, tg, tx, tt, to, spans, kshape, kstrides, rshape, rstrides, n_out, cof64, tile, nblocks
        ):
            # One output at a time, its sum in REDUCE_LANES lanes: element p of each run of the
            # innermost summed dim goes to lane p % REDUCE_LANES, each lane a Kahan sum in ascending
            # order, then the lanes are summed in lane order, their compensations first. The order
            # is the geometry's alone (never the tile's, the cores' or the host's vector width), so
            # every config gives the same bits. Across outputs (reduce_walk), such a geometry's
            # lanes are strided loads of one element each, and a single output is one lane: 4-62x
            # the contiguous case's time, up to 6x PyTorch's (results/performance.md, section 51).
            # ``tile`` is unused here.
            g, x, t = _view(pg, spans[0], tg), _view(px, spans[1], tx), _view(pt, spans[2], tt)
            o = _view(po, spans[3], to)
            cof = np.float32(cof64)
            nr = rshape.shape[0]
            run = rshape[nr - 1]
            whole = np.uint64(run // REDUCE_LANES * REDUCE_LANES)
            urun = np.uint64(run)
            nouter = 1
            for d in range(nr - 1):
                nouter *= rshape[d]
            chunk = (n_out + nblocks - 1) // nblocks
            for b in prange(nblocks):
                vectors()
                acc = np.empty(REDUCE_LANES, np.float32)
                comp = np.empty(REDUCE_LANES, np.float32)
                for e in range(b * chunk, min(n_out, (b + 1) * chunk)):
                    _, bg, bx, bt, bo = _kept_at(e, kshape, kstrides)
                    for j in range(REDUCE_LANES):
                        acc[j] = np.float32(0.0)
                        comp[j] = np.float32(0.0)
                    for ro in range(nouter):
                        ug, ox, ut = _summed_at(ro, bg, bx, bt, rshape, rstrides, nr - 1)
                        x0 = _load(x, ox)  # self is constant along the summed dims (and KL never reads it)
                        g0 = _load(g, ug)
                        for p0 in range(np.uint64(0), whole, np.uint64(REDUCE_LANES)):
                            for j in range(np.uint64(REDUCE_LANES)):
                                gi = g0 if scalar_g else _load(g, ug + p0 + j)
                                v = value(gi, x0, _load(t, ut + p0 + j), cof)
                                acc[j], comp[j] = _kahan(acc[j], comp[j], v)
                        for p in range(whole, urun):
                            j = p - whole
                            gi = g0 if scalar_g else _load(g, ug + p)
                            v = value(gi, x0, _load(t, ut + p), cof)
                            acc[j], comp[j] = _kahan(acc[j], comp[j], v)
                    c1 = np.float32(0.0)
                    for j in range(REDUCE_LANES):
                        c1 = np.float32(c1 + comp[j])
                    s1 = np.float32(0.0)
                    for j in range(REDUCE_LANES):
                        s1, c1 = _kahan(s1, c1, acc[j])
                    _store(o, bo, s1)

        return reduce_along

    def both(fn: Callable[..., None]) -> tuple[Callable[..., None], Callable[..., None]]:
        return njit(nogil=True)(fn), njit(parallel=True, nogil=True)(fn)

    if apart is None:
        apart = compute_bound and TILES_APART
    walks = {
        (tile, row): both(transposed_walk(tile * 4, row, apart)) for tile in TRANSPOSED_TILES for row in TRANSPOSE_ROWS
    }
    walks_in = {
        (tile, row): both(transposed_in_walk(tile * 4, row)) for tile in TRANSPOSED_TILES for row in TRANSPOSE_ROWS
    }

    # Only the compute-bound formulas' deferred walks are built per kind of run: the others never
    # waited on the reloaded constants (their walks moved within spread, section 49), and one build
    # of each keeps their compiled loops, and so the tuned tables' entries, as they were.
    def deferred(
        tile: int, row: int
    ) -> dict[tuple[int, int, StridedRun], tuple[Callable[..., None], Callable[..., None]]]:
        if compute_bound:
            return {(tile, row, kind): both(transposed_deferred_walk(tile * 4, row, kind)) for kind in StridedRun}
        return dict.fromkeys(
            ((tile, row, kind) for kind in StridedRun), both(transposed_deferred_walk(tile * 4, row, None))
        )

    walks_deferred = {
        key: fns for tile in TRANSPOSED_TILES for row in TRANSPOSE_ROWS for key, fns in deferred(tile, row).items()
    }
    runs = {run: both(strided_walk(run, apart)) for run in StridedRun}
    reduces = {run: both(reduce_walk(run)) for run in StridedRun}
    reduces_along = {scalar_g: both(reduce_along_walk(scalar_g)) for scalar_g in (False, True)}
    flat_loop = apart_contiguous if apart else contiguous
    return CpuKernels(
        both(flat_loop(False)),
        both(flat_loop(True)),
        runs,
        walks,
        reduces,
        walks_in,
        walks_deferred,
        reduces_along,
    )


_threads = threading.local()  # numba's thread count is per calling thread, so is this memo of it


def set_threads(n: int) -> None:
    """numba.set_num_threads, skipped when already n: it costs ~1 us, a tenth of a small launch."""
    if getattr(_threads, "n", None) != n:
        numba.set_num_threads(n)
        _threads.n = n


def max_threads() -> int:
    return int(numba.config.NUMBA_NUM_THREADS)
