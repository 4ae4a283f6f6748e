"""numba loops of the CPU backend: one factory, specialised per op formula.

Every op is the same loop over an iteration space with a different scalar formula, so the loops
live here once and each op module supplies only ``value(g, x, t, cof) -> float32``.

numba has no float16, so 16-bit operands travel as their raw bits and are converted inside the
loop, element by element, never by an extra pass over the tensor. The numpy integer type names the
format, so numba compiles a separate specialisation per format with no branch in the loop:
``uint16`` carries bfloat16 bits and ``int16`` carries float16 bits.

``cores`` blocks each own a contiguous range (like an AI core's blockDim share); each block is
walked ``tile`` elements per step. The parallel build runs the blocks on numba's thread pool.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange, types
from numba.extending import overload

_F16_MAGIC = np.float32(2.0**112)  # rebias a float16 exponent (15) to float32's (127)


@njit(inline="always")
def _bits_to_f32(u: np.uint32) -> np.float32:
    return np.uint32(u).view(np.float32)


@njit(inline="always")
def _bf16_to_f32(b: np.uint16) -> np.float32:
    return _bits_to_f32(np.uint32(b) << np.uint32(16))


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


@njit(inline="always")
def _f32_to_bf16(f: np.float32) -> np.uint16:
    u = np.float32(f).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet = (u >> np.uint32(16)) | np.uint32(0x40)  # NaN stays a (quiet) NaN, sign and payload kept
    return np.uint16(_select((u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000), quiet, rounded))


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
        return lambda a, i: _f16_to_f32(a[i])
    raise TypeError(f"unsupported element type {a.dtype}")


@overload(_store)
def _store_impl(a, i, v):
    if a.dtype == types.float32:

        def store_f32(a, i, v):
            a[i] = v

        return store_f32
    if a.dtype == types.uint16:

        def store_bf16(a, i, v):
            a[i] = _f32_to_bf16(v)

        return store_bf16
    if a.dtype == types.int16:

        def store_f16(a, i, v):
            a[i] = _f32_to_f16(v)

        return store_f16
    raise TypeError(f"unsupported element type {a.dtype}")


@dataclass(frozen=True)
class CpuKernels:
    """The compiled loops of one formula; ``serial`` for one core (no thread pool), ``parallel`` otherwise."""

    flat: tuple[Callable[..., None], Callable[..., None]]
    scalar_grad: tuple[Callable[..., None], Callable[..., None]]
    strided: tuple[Callable[..., None], Callable[..., None]]
    reduce: tuple[Callable[..., None], Callable[..., None]]


def make_cpu_kernels(value_py: Callable[..., float]) -> CpuKernels:
    """Build the four loops around ``value_py(g, x, t, cof)``; numba compiles each lazily per dtype set."""
    value = njit(inline="always")(value_py)

    # The element index of the contiguous loops is unsigned: with a signed one numba must allow for
    # Python's negative indexing on every load and store, which kept LLVM from vectorising the
    # loops (3x on a float16 loop, measured in results/performance.md).
    def flat(g, x, t, o, n, cof, tile, nblocks):
        chunk = ((n + nblocks - 1) // nblocks + 15) // 16 * 16  # whole cache lines per block
        for b in prange(nblocks):
            end = min(n, (b + 1) * chunk)
            for s in range(b * chunk, end, tile):
                for i in range(np.uint64(s), np.uint64(min(s + tile, end))):
                    _store(o, i, value(_load(g, i), _load(x, i), _load(t, i), cof))

    def scalar_grad(g, x, t, o, n, cof, tile, nblocks):
        g0 = _load(g, 0)  # read once, not n times
        chunk = ((n + nblocks - 1) // nblocks + 15) // 16 * 16
        for b in prange(nblocks):
            end = min(n, (b + 1) * chunk)
            for s in range(b * chunk, end, tile):
                for i in range(np.uint64(s), np.uint64(min(s + tile, end))):
                    _store(o, i, value(g0, _load(x, i), _load(t, i), cof))

    def strided(g, x, t, o, shape, strides, n, cof, tile, nblocks):
        # shape[nd], strides[4, nd] in elements for g, x, t, o; innermost dim last.
        nd = shape.shape[0]
        last = nd - 1
        chunk = (n + nblocks - 1) // nblocks
        for b in prange(nblocks):
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
            while pos < end:
                m = min(shape[last] - idx[last], end - pos, tile)
                # Unsigned offsets (strides here are never negative) for the same reason as in flat.
                ug, ux, ut, uo = np.uint64(og), np.uint64(ox), np.uint64(ot), np.uint64(oo)
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

    def reduce(g, x, t, o, kshape, kstrides, rshape, rstrides, n_out, cof, tile, nblocks):
        # Each output element sums its broadcast dims in ascending linear order, whatever the
        # tiling: the result is bitwise the same for every config. Kahan keeps float32 accurate.
        nk = kshape.shape[0]
        nr = rshape.shape[0]
        nred = 1
        for d in range(nr):
            nred *= rshape[d]
        chunk = (n_out + nblocks - 1) // nblocks
        for b in prange(nblocks):
            end = min(n_out, (b + 1) * chunk)
            for s in range(b * chunk, end, tile):
                for e in range(s, min(s + tile, end)):
                    bg = bx = bt = bo = 0
                    rem = e
                    for d in range(nk - 1, -1, -1):
                        q = rem % kshape[d]
                        rem //= kshape[d]
                        bg += q * kstrides[0, d]
                        bx += q * kstrides[1, d]
                        bt += q * kstrides[2, d]
                        bo += q * kstrides[3, d]
                    acc = np.float32(0.0)
                    comp = np.float32(0.0)
                    for r in range(nred):
                        og, ox, ot = bg, bx, bt
                        rem = r
                        for d in range(nr - 1, -1, -1):
                            q = rem % rshape[d]
                            rem //= rshape[d]
                            og += q * rstrides[0, d]
                            ox += q * rstrides[1, d]
                            ot += q * rstrides[2, d]
                        y = value(_load(g, og), _load(x, ox), _load(t, ot), cof) - comp
                        tot = np.float32(acc + y)
                        comp = np.float32(np.float32(tot - acc) - y)
                        acc = tot
                    _store(o, bo, acc)

    def both(fn: Callable[..., None]) -> tuple[Callable[..., None], Callable[..., None]]:
        return njit(nogil=True)(fn), njit(parallel=True, nogil=True)(fn)

    return CpuKernels(both(flat), both(scalar_grad), both(strided), both(reduce))


def set_threads(n: int) -> None:
    numba.set_num_threads(n)


def max_threads() -> int:
    return int(numba.config.NUMBA_NUM_THREADS)
