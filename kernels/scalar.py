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
    """``x * 2**k`` rounded once, subnormal results included (the formula keeps k in [-252, 254])."""
    return math.ldexp(x, k)
