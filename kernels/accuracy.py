"""The accuracy bar of SEMANTICS.md, as one check the tests, the tuner and the benchmarks share.

float32 within 4 ulp of the float64 reference, float16/bfloat16 within 1 ulp of the output dtype;
KL with a broadcast sum within relative 1e-5 of the summed magnitudes. NaN where the reference is
NaN, the same infinities where the reference rounds to one.
"""

from __future__ import annotations

import math

import torch

MANTISSA = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}
# KL's broadcast sum: within this much of the summed magnitudes (mismatch's ``rel``), plus the
# output's own rounding (SUM_ULPS: none for float32, whose sum is the output, 1 ulp for 16-bit).
SUM_REL = 1e-5
SUM_ULPS = {torch.float32: 0.0, torch.float16: 1.0, torch.bfloat16: 1.0}
MIN_EXP = {torch.float32: -126, torch.float16: -14, torch.bfloat16: -126}


def ulps_for(dtype: torch.dtype) -> float:
    return 4.0 if dtype == torch.float32 else 1.0


def ulp(ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype`` at each finite float64 value (subnormal spacing near zero).

    frexp's exponent read from the bits, and the power of two written into them: exact, and a third
    of the time of frexp and pow (mismatch's chunks, section 109). A zero takes frexp's exponent 0,
    as it always has. NaN and infinities get a value no caller reads."""
    bits = ref.double().view(torch.int64)
    exp = torch.where(ref == 0, 0, ((bits >> 52) & 0x7FF) - 1022)  # frexp's: ref = m 2^exp, m in [0.5, 1)
    lead = torch.clamp(exp - 1, min=MIN_EXP[dtype])  # subnormal doubles are far below MIN_EXP
    return ((lead - MANTISSA[dtype] + 1023) << 52).view(torch.float64)


# Elements compared at a time. The check works in float64, with a dozen temporaries the size of
# what it compares: whole, a 2^24-element out took 580k fresh 4 KiB pages (2.2 GiB) and 0.92 s per
# check on the 480 MiB-L3 Xeon, 0.89 s of it system time in page faults, the most of a tuner's
# sweep at that size (results/performance.md, section 109). Chunks this size reuse the heap's pages.
CHUNK = 1 << 15


def mismatch(
    out: torch.Tensor,
    ref: torch.Tensor,
    ulps: float | None = None,
    *,
    rel_to: torch.Tensor | None = None,
    rel: float = 0.0,
) -> str | None:
    """None when ``out`` meets the bar against ``ref``, else a message naming the worst element.

    In order: a NaN where the reference has none or none where it has one (the first five places),
    an infinity the reference does not round to, then the bar on the finite elements."""
    ulps = ulps_for(out.dtype) if ulps is None else ulps
    shape = out.shape
    got_flat = out.detach().reshape(-1)
    ref_flat = torch.broadcast_to(ref.detach(), shape).reshape(-1)
    rel_flat = None if rel_to is None else torch.broadcast_to(rel_to.detach(), shape).reshape(-1)
    shortcut = ulps >= 1 and rel_flat is None  # an equal chunk passes whole (below)
    nan_at: list[int] = []
    inf_differ = False
    bad_n = finite_n = 0
    worst: tuple[float, float, float, float, float] | None = None  # score, got, ref, err, tol
    for start in range(0, got_flat.numel(), CHUNK):
        part = slice(start, start + CHUNK)
        want = ref_flat[part].cpu().double()
        native, rounded_native = got_flat[part].cpu(), want.to(out.dtype)
        if shortcut and torch.equal(native, rounded_native):
            # The reference rounded, in every element (no NaN: NaN equals nothing): within half the
            # dtype's spacing at its value, and a hair more for a 16-bit dtype, which torch reaches
            # through float32 (two roundings), so inside a bar of 1 ulp or more. A 16-bit kernel's
            # chunks are so as a rule, and pass without the float64 arithmetic below.
            finite_n += int(torch.isfinite(rounded_native).sum())
            continue
        got, rounded = native.double(), rounded_native.double()
        nan = torch.isnan(want)
        nan_differs = torch.isnan(got) != nan
        if len(nan_at) < 5 and nan_differs.any():
            nan_at += (torch.nonzero(nan_differs).flatten()[: 5 - len(nan_at)] + start).tolist()
        inf = torch.isinf(rounded)
        # Boolean indexing is the costliest op here; most chunks have nothing to set aside.
        inf_any, nan_any = bool(inf.any()), bool(nan.any())
        inf_differ = inf_differ or (inf_any and not torch.equal(got[inf], rounded[inf]))
        tol_of = None if rel_flat is None else rel_flat[part].cpu().double()
        if inf_any or nan_any:
            finite = ~nan & ~inf
            got, want = got[finite], want[finite]
            tol_of = None if tol_of is None else tol_of[finite]
        err = (got - want).abs()
        tol = ulps * ulp(want, out.dtype)
        if tol_of is not None:
            tol = tol + rel * tol_of
        bad = err > tol
        finite_n += bad.numel()
        bad_n += int(bad.sum())
        # The worst element is the first of the largest score, where a NaN score (a NaN or infinite
        # relative scale) counts largest, as torch.argmax over the whole tensor had it. A chunk with
        # no element off and a finite bar has no score above 0, so it never holds the worst.
        if bad.any() or (tol_of is not None and not bool(torch.isfinite(tol).all())):
            score = (err - tol) / tol.clamp(min=1e-300)
            i = int(torch.argmax(score))
            top = score[i].item()
            if worst is None or (not math.isnan(worst[0]) and (math.isnan(top) or top > worst[0])):
                worst = (top, got[i].item(), want[i].item(), err[i].item(), tol[i].item())
    if nan_at:
        where = torch.stack(torch.unravel_index(torch.tensor(nan_at), shape), dim=1) if shape else None
        return f"NaN mismatch at {where.tolist() if where is not None else [[]]}"
    if inf_differ:
        return "infinities differ"
    if worst is None or not bad_n:
        return None
    _, got_i, ref_i, err_i, tol_i = worst
    return f"{bad_n} of {finite_n} elements off: e.g. got {got_i!r}, ref {ref_i!r}, err {err_i:.3g} > tol {tol_i:.3g}"
