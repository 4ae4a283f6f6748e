"""Accuracy checks of SEMANTICS.md: ulps of the output dtype against the float64 reference."""

from __future__ import annotations

import torch

MANTISSA = {torch.float32: 23, torch.float16: 10, torch.bfloat16: 7}
MIN_EXP = {torch.float32: -126, torch.float16: -14, torch.bfloat16: -126}


def ulp(ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing of ``dtype`` at each float64 value (subnormal spacing near zero)."""
    _, exp = torch.frexp(ref.abs())
    lead = torch.clamp(exp.double() - 1, min=MIN_EXP[dtype])
    return torch.pow(2.0, lead - MANTISSA[dtype])


def assert_within(
    out: torch.Tensor, ref: torch.Tensor, ulps: float, *, rel_to: torch.Tensor | None = None, rel: float = 0.0
) -> None:
    """|out - ref| <= ulps * ulp(ref) (+ rel * rel_to); NaN where ref is NaN, equal infinities."""
    got = out.detach().cpu().double()
    ref = ref.double().expand_as(got) if ref.shape != got.shape else ref.double()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    rounded = ref.to(out.dtype).double()  # what the exact value is in the output dtype
    nan = torch.isnan(ref)
    assert torch.equal(torch.isnan(got), nan), f"NaN mismatch at {torch.nonzero(torch.isnan(got) != nan)[:5].tolist()}"
    inf = torch.isinf(rounded)
    assert torch.equal(got[inf], rounded[inf]), "infinities differ"
    finite = ~nan & ~inf
    err = (got - ref).abs()[finite]
    tol = ulps * ulp(ref, out.dtype)[finite]
    if rel_to is not None:
        tol = tol + rel * rel_to.double().expand_as(got)[finite]
    bad = err > tol
    if bad.any():
        i = torch.nonzero(bad)[0].item()
        raise AssertionError(
            f"{int(bad.sum())} of {bad.numel()} elements off: e.g. got {got[finite][i].item()!r}, "
            f"ref {ref[finite][i].item()!r}, err {err[i].item():.3g} > tol {tol[i].item():.3g}"
        )


def ulps_for(dtype: torch.dtype) -> float:
    return 4.0 if dtype == torch.float32 else 1.0
