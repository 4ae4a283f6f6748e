"""The accuracy bar of SEMANTICS.md, as one check the tests, the tuner and the benchmarks share.

float32 within 4 ulp of the float64 reference, float16/bfloat16 within 1 ulp of the output dtype;
KL with a broadcast sum within relative 1e-5 of the summed magnitudes. NaN where the reference is
NaN, the same infinities where the reference rounds to one.
"""

from __future__ import annotations

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
    """The spacing of ``dtype`` at each float64 value (subnormal spacing near zero)."""
    _, exp = torch.frexp(ref.abs())
    lead = torch.clamp(exp.double() - 1, min=MIN_EXP[dtype])
    return torch.pow(2.0, lead - MANTISSA[dtype])


def mismatch(
    out: torch.Tensor,
    ref: torch.Tensor,
    ulps: float | None = None,
    *,
    rel_to: torch.Tensor | None = None,
    rel: float = 0.0,
) -> str | None:
    """None when ``out`` meets the bar against ``ref``, else a message naming the worst element."""
    ulps = ulps_for(out.dtype) if ulps is None else ulps
    got = out.detach().cpu().double()
    ref = ref.double().expand_as(got) if ref.shape != got.shape else ref.double()
    rounded = ref.to(out.dtype).double()
    nan = torch.isnan(ref)
    if not torch.equal(torch.isnan(got), nan):
        return f"NaN mismatch at {torch.nonzero(torch.isnan(got) != nan)[:5].tolist()}"
    inf = torch.isinf(rounded)
    if not torch.equal(got[inf], rounded[inf]):
        return "infinities differ"
    finite = ~nan & ~inf
    err = (got - ref).abs()[finite]
    tol = ulps * ulp(ref, out.dtype)[finite]
    if rel_to is not None:
        tol = tol + rel * rel_to.double().expand_as(got)[finite]
    bad = err > tol
    if not bad.any():
        return None
    i = int(torch.argmax((err - tol) / tol.clamp(min=1e-300)))
    return (
        f"{int(bad.sum())} of {bad.numel()} elements off: e.g. got {got[finite][i].item()!r}, "
        f"ref {ref[finite][i].item()!r}, err {err[i].item():.3g} > tol {tol[i].item():.3g}"
    )
