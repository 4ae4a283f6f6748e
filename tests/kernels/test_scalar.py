"""kernels/scalar.py's helpers as the CPU backend compiles them, against their Python meaning.

ldexp has two builds (vscalefps with AVX-512F, three powers of two from exponent bits without it); both are
checked here in one process, and the ops through the three-powers build in a fresh one. ldexp_half's
one-power build is checked against ldexp's float16 rounding over its whole domain, ldexp_checked's
against ldexp's float32 rounding where it does not flag.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from numba import njit

from kernels import scalar
from kernels.backends import cpu_loops
from tests.helpers import run_fresh

SCALEF = pytest.mark.skipif(not cpu_loops.HAS_SCALEF, reason="host has no AVX-512F (or LOSSTUNE_CPU_SCALEF=0)")


def _ldexp_loop(ldexp: Callable[..., float]) -> Callable[..., None]:
    @njit
    def loop(x, k, out):
        for i in range(x.size):
            out[i] = ldexp(x[i], k[i])

    return loop


_scalef = _ldexp_loop(cpu_loops._ldexp_scalef)
_powers = _ldexp_loop(cpu_loops._ldexp_powers)
_one_power = _ldexp_loop(cpu_loops._ldexp_one_power)


@njit
def _checked_loop(x, k, out, flags):
    for i in range(x.size):
        out[i], flags[i] = scalar.ldexp_checked(x[i], k[i])


@njit
def _fma_loop(a, b, c, out):
    for i in range(a.size):
        out[i] = scalar.fma(a[i], b[i], c[i])


def _ldexp_cases() -> tuple[np.ndarray, np.ndarray]:
    """Mantissas in [1, 2) and the range KL's exp uses, every k from -378 to 381 (subnormal, zero and
    infinite results included), plus zeros, infinities and NaN."""
    rng = np.random.default_rng(7)
    k = np.repeat(np.arange(-378, 382, dtype=np.int32), 40)
    x = rng.uniform(0.7, 2.0, k.size).astype(np.float32) * rng.choice(np.float32([-1, 1]), k.size)
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 1.0])
    return np.concatenate([x, special]), np.concatenate([k, np.int32([5, 5, -3, 7, 1, -149, -150])])


def _want(x: np.ndarray, k: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):  # the infinite results are meant
        return np.ldexp(x, k).astype(np.float32)  # float32 ldexp: rounded once


@SCALEF
def test_ldexp_with_scalef_is_exact_bit_for_bit() -> None:
    x, k = _ldexp_cases()
    out = np.empty_like(x)
    _scalef(x, k, out)
    want = _want(x, k)
    same = (out.view(np.uint32) == want.view(np.uint32)) | (np.isnan(out) & np.isnan(want))
    assert same.all(), f"{(~same).sum()} differ, e.g. x={x[~same][:3]} k={k[~same][:3]}: {out[~same][:3]}"


def test_ldexp_in_three_powers_is_exact_except_one_subnormal_ulp() -> None:
    x, k = _ldexp_cases()
    out = np.empty_like(x)
    _powers(x, k, out)
    want = _want(x, k)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(out), nan)
    normal = np.abs(want[~nan]) >= np.finfo(np.float32).tiny
    diff = np.abs(out[~nan].astype(np.float64) - want[~nan])
    assert np.array_equal(out[~nan][normal], want[~nan][normal]), "normal results must be exact"
    assert diff[~normal].max() <= 2.0**-149, "a subnormal result may be off by one subnormal ulp"


def test_ldexp_half_in_one_power_rounds_to_ldexps_float16_on_its_whole_domain() -> None:
    """ldexp_half's domain: |x| in [2^-27, 2^16] (every binade, both ends, random mantissas) and 0,
    inf, NaN, against every k KL's exp can ask for (-378 to 381): its one clamped power gives the
    float16 that the exact (float64) product rounds to, bit for bit, as ldexp's float32 does."""
    rng = np.random.default_rng(5)
    ends = np.float32([2.0**-27, 2.0**16, 65504.0, 65520.0, 2.0**-24, 2.0**-25, 1.0])
    binades = np.exp2(rng.integers(-27, 16, 4000)).astype(np.float32) * rng.uniform(1.0, 2.0, 4000).astype(np.float32)
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan])
    x = np.concatenate([ends, -ends, binades, -binades, special])
    k = np.arange(-378, 382, dtype=np.int32)
    xs, ks = np.repeat(x, k.size), np.tile(k, x.size)
    out = np.empty_like(xs)
    _one_power(xs, ks, out)
    with np.errstate(over="ignore"):
        want = np.ldexp(xs.astype(np.float64), ks).astype(np.float16)  # one rounding, into 16 bits
    got = out.astype(np.float16)
    same = (got.view(np.uint16) == want.view(np.uint16)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{(~same).sum()} differ, e.g. x={xs[~same][:3]} k={ks[~same][:3]}: {got[~same][:3]}"
    inside = (ks >= -126) & (ks <= 127) & np.isfinite(xs)
    exact = np.ldexp(xs[inside].astype(np.float64), ks[inside])
    normal = np.abs(exact) >= np.finfo(np.float32).tiny
    assert np.array_equal(out[inside][normal], exact[normal].astype(np.float32)), "a normal result is exact"


def test_ldexp_checked_is_ldexp_where_unflagged_and_flags_every_k_outside_one_power() -> None:
    """ldexp_checked's build (one power of two, k unclamped, Scale.NEAR) against the exact product's
    float32 rounding for every k in [-126, 127], x over every float32 binade (subnormal results
    included, so the one multiply must round them once), 0, inf and NaN; and its flag: set for
    exactly the k outside that range, over every k KL's exp can ask for."""
    rng = np.random.default_rng(6)
    mags = np.exp2(rng.integers(-126, 128, 3000)).astype(np.float32) * rng.uniform(1.0, 2.0, 3000).astype(np.float32)
    special = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, np.finfo(np.float32).max, 2.0**-149])
    x = np.concatenate([mags, -mags, special]).astype(np.float32)
    k = np.arange(-378, 382, dtype=np.int32)
    xs, ks = np.repeat(x, k.size), np.tile(k, x.size)
    out, flags = np.empty_like(xs), np.empty(xs.size, np.bool_)
    _checked_loop(xs, ks, out, flags)
    assert np.array_equal(flags, (ks < -126) | (ks > 127))
    inside = ~flags
    with np.errstate(over="ignore"):
        want = np.ldexp(xs[inside].astype(np.float64), ks[inside]).astype(np.float32)  # one rounding
    got = out[inside]
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), f"{(~same).sum()} differ, e.g. x={xs[inside][~same][:3]} k={ks[inside][~same][:3]}"
    assert scalar.ldexp_checked(1.5, -20) == (scalar.ldexp(1.5, -20), False)
    assert scalar.ldexp_checked(1.5, 128)[1] and scalar.ldexp_checked(1.5, -127)[1]


def test_fma_is_one_rounding_where_the_host_has_fma() -> None:
    rng = np.random.default_rng(11)
    a, b, c = (rng.standard_normal(4000).astype(np.float32) for _ in range(3))
    c[:1000] = -(a[:1000] * b[:1000])  # cancellation: a fused and an unfused result differ here
    out = np.empty_like(a)
    _fma_loop(a, b, c, out)
    exact = [Fraction(float(p)) * Fraction(float(q)) + Fraction(float(r)) for p, q, r in zip(a, b, c, strict=True)]
    err = np.array([abs(Fraction(float(o)) - e) for o, e in zip(out, exact, strict=True)], dtype=np.float64)
    spacing = np.spacing(np.abs(out)).astype(np.float64)
    fused = bool(cpu_loops.llvm.get_host_cpu_features().get("fma", False))
    # Fused: the nearest float32 to the exact value. Unfused: the product's rounding adds up to
    # half an ulp of the product on top, which cancellation makes large relative to the result.
    if fused:
        assert (err <= spacing / 2).all(), "fma must round once on a host with FMA"
    else:
        product_ulp = np.spacing(np.abs(a * b)).astype(np.float64)
        assert (err <= spacing / 2 + product_ulp / 2).all()


def test_python_meaning_of_the_helpers() -> None:
    """The plain-Python bodies are the documented meaning; the compiled ones are checked against it."""
    assert scalar.fma(2.0, 3.0, 1.0) == 7.0
    assert scalar.ldexp(1.5, -149) == 1.5 * 2.0**-149
    assert scalar.ldexp(1.0, 128) == 2.0**128  # float64 here; float32 kernels overflow to inf
    assert scalar.ldexp_half(1.5, -20) == scalar.ldexp(1.5, -20)
    assert scalar.frexp(0.75) == (0.75, 0) and scalar.frexp(-6.0) == (-0.75, 3)
    assert scalar.horner(2.0, (1.0, 3.0, 0.5)) == 1.0 + 3.0 * 2.0 + 0.5 * 4.0


@njit
def _frexp_loop(x, m, e):
    for i in range(x.size):
        m[i], e[i] = scalar.frexp(x[i])


def test_frexp_compiled_matches_math_frexp_on_normal_floats() -> None:
    rng = np.random.default_rng(3)
    x = np.concatenate(
        [
            np.float32([1.0, 0.5, 2.0**-126, np.finfo(np.float32).max, 1.0 / 3, -1.0 / 2**26]),
            (rng.standard_normal(2000) * np.exp2(rng.integers(-120, 120, 2000))).astype(np.float32),
        ]
    )
    m, e = np.empty_like(x), np.empty(x.size, np.int32)
    _frexp_loop(x, m, e)
    want = [scalar.frexp(float(v)) for v in x]
    assert m.tolist() == [w[0] for w in want] and e.tolist() == [w[1] for w in want]


@njit
def _horner_loop(x, out):
    c = (np.float32(0.5), np.float32(-1.25), np.float32(0.375), np.float32(2.0))
    for i in range(x.size):
        out[i] = scalar.horner(x[i], c)


def test_horner_compiled_is_the_python_meaning_in_float32() -> None:
    x = np.linspace(-3.0, 3.0, 1001, dtype=np.float32)
    out = np.empty_like(x)
    _horner_loop(x, out)
    c = (0.5, -1.25, 0.375, 2.0)
    want = np.array([scalar.horner(float(v), c) for v in x])
    assert np.abs(out - want).max() <= 4 * np.spacing(np.float32(np.abs(want).max())), "Horner, in float32"
    assert out[500] == np.float32(0.5)  # x = 0: the constant term alone


def test_kl_log_target_meets_the_bar_through_the_three_powers_ldexp() -> None:
    """LOSSTUNE_CPU_SCALEF=0 (or a host without AVX-512F) builds the three-powers ldexp into the exp of
    kl_div with log_target; the whole float32 range must meet the bar through it, in a fresh process."""
    code = (
        "import torch, kernels\n"
        "from kernels.backends import cpu_loops\n"
        "from kernels.accuracy import mismatch\n"
        "from kernels.ops import kl_div\n"
        "assert not cpu_loops.HAS_SCALEF\n"
        "t = torch.cat([torch.linspace(-110.0, 95.0, 100_001, dtype=torch.float64),\n"
        "               torch.tensor([float('nan'), float('inf'), -float('inf'), -103.97208, 88.72284])]).float()\n"
        "g = torch.full_like(t, -1.0)\n"
        "cases = [(g.to(d), t.to(d)) for d in (torch.float32, torch.float16, torch.bfloat16)]\n"
        "# the product past exp's own range: a tiny or huge g, the scale by up to 2^+-345 last\n"
        "wide = torch.linspace(-200.0, 250.0, 9001).repeat(4)\n"
        "gw = torch.tensor([1e-30, -3e38, 0.0, 2.0]).repeat_interleave(9001)\n"
        "cases += [(gw, wide), (gw.bfloat16(), wide.bfloat16())]\n"
        "problems = [mismatch(kernels.kl_div_backward(gd, td, td, 'sum', True),\n"
        "                     kl_div.reference(gd, td, td, 'sum', True)) for gd, td in cases]\n"
        "print(problems)\n"
    )
    assert run_fresh(code, {"LOSSTUNE_CPU_SCALEF": "0"}) == "[None, None, None, None, None]"
