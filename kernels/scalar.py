"""Scalar helpers an op formula may call (kernels/executor.Formula.value).

Formulas are plain Python that a backend compiles; ops import no compiler. These functions are
the formula's vocabulary beyond arithmetic: each backend that compiles formulas replaces them with
what its hardware does in one instruction (the CPU backend: kernels/backends/cpu_loops.py, LLVM's
``fmuladd`` and ``ldexp``). The bodies here are the meaning, in Python's float64, for reading and
for tests; no kernel runs them.
"""

from __future__ import annotations

import math


def fma(a: float, b: float, c: float) -> float:
    """``a * b + c``, fused (one rounding) where the hardware has FMA, else a multiply then an add.

    A formula that calls it must be accurate either way: the CPU backend fuses only where fusing
    costs one instruction (a libm ``fmaf`` call would keep the loop scalar).
    """
    return a * b + c


def ldexp(x: float, k: int) -> float:
    """``x * 2**k`` rounded once, subnormal results included (for k in [-378, 381]: the CPU build
    without AVX-512F scales by three normal powers of two)."""
    return math.ldexp(x, k)


def ldexp_half(x: float, k: int) -> float:
    """``ldexp`` where only the result's float16 rounding is wanted, for ``|x|`` in [2^-27, 2^16]
    (zero, inf and NaN too): every k then gives the float16 that ``ldexp``'s result rounds to. The
    CPU build without AVX-512F clamps k into [-126, 127] and multiplies by one power of two, a third
    of ``ldexp``'s three: below -126 both results round to a float16 zero, above 127 both to inf."""
    return math.ldexp(x, k)


def ldexp_checked(x: float, k: int) -> tuple[float, bool]:
    """``(ldexp(x, k), False)`` for k in [-126, 127], where 2^k is one normal float32 and one
    multiply rounds the product once (a subnormal result included); ``(anything, True)`` outside it.
    A formula that returns it is the cheap twin of one that calls ``ldexp``: the loops that take it
    redo every element of a tile whose flags are not all False with ``ldexp`` (the CPU build without
    AVX-512F, where ``ldexp`` is three powers of two)."""
    return math.ldexp(x, k), not -126 <= k <= 127


def frexp(x: float) -> tuple[float, int]:
    """``(m, e)`` with ``x = m * 2**e`` and ``0.5 <= |m| < 1``, for a normal x (the CPU build reads
    x's bits, so zero, subnormals, inf and NaN are outside its domain). A formula calls it on a
    loop-invariant scalar, so the split costs nothing per element."""
    return math.frexp(x)


def horner(x: float, coefficients: tuple[float, ...]) -> float:
    """``sum(c[i] * x**i)``, coefficients lowest degree first, by Horner's rule from the highest:
    one fma per coefficient below it; compiled unrolled, the tuple's length known when the formula is."""
    acc = coefficients[-1]
    for c in reversed(coefficients[:-1]):
        acc = fma(acc, x, c)
    return acc
