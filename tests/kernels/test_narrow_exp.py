"""KL log_target's shorter formulas: the narrow one (Formula.narrow_value), the degree-3 exp the CPU
backend runs for float16/bfloat16 outputs of elementwise walks; the coarse one (Formula.coarse_value),
the degree-2 exp it runs for bfloat16 outputs where the host takes it (backends.cpu.coarse_offered:
the Zen 5 and the Xeon; these tests take it on any host, and leave it off, by the backend's
switch); the sum one (Formula.sum_value), the degree-5 exp of a broadcast sum's terms; and the
degree-7 one it keeps everywhere else.

The narrow exp is held to the 16-bit bar on every float16 and bfloat16 target there is (65536 bit
patterns each, NaN and inf and subnormals included), through the library on the CPU backend, in
each elementwise variant; its float16-gradient twin (Formula.half_value) gives its bits. Broadcast
sums must not take it where their terms may cancel (a gradient of many values): the sum would show
the short polynomial's 1e-4 relative error against SEMANTICS' 1e-5 bar. Their sum exp is held to
that bar over the exp's whole finite range, where its one-fma reduction is least exact. Sums of a
one-value gradient into 16-bit outputs, whose terms all share one sign, take the narrow exp, held
to the 16-bit bar on every target again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch

import kernels
from kernels import aclnn, dispatch
from kernels.backends import cpu, cpu_loops
from kernels.ops import kl_div
from tests.helpers import assert_within, run_fresh

SIXTEEN = (torch.float16, torch.bfloat16)
# (out dtype, whether the backend takes the coarse formula): bfloat16 both ways, on any host.
EXPS = [(torch.float16, False), (torch.bfloat16, False), (torch.bfloat16, True)]
EXP_IDS = ["float16", "bfloat16-narrow", "bfloat16-coarse"]


@pytest.fixture
def coarse(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[bool], None]]:
    """Sets whether the CPU backend's bfloat16 outputs take the coarse formula (CpuBackend.coarse,
    its host's pick), with no plan cached from before (each plan holds the loops it was made with)."""

    def take(on: bool) -> None:
        monkeypatch.setattr(cpu.BACKEND, "coarse", on)
        dispatch.clear_plans()

    yield take
    dispatch.clear_plans()


def _every_value(dtype: torch.dtype) -> torch.Tensor:
    """All 65536 bit patterns of a 16-bit float dtype."""
    return torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)


def test_narrow_polynomial_error_bound_in_float64() -> None:
    """The coefficients as shipped (float32) against exp over the reduced range and a little past it
    (k's rounding lets r overshoot ln2/2 by an ulp): under a quarter of float16's smallest relative
    half ulp, 2^-12, so one rounding into 16 bits stays within 1 ulp."""
    r = np.linspace(-0.35, 0.35, 400_001)
    c = [2.0 * float(v) for v in kl_div._SHORT]  # shipped halved (exactly): the exp is twice them
    p = ((c[3] * r + c[2]) * r + c[1]) * r + c[0]
    worst = float(np.max(np.abs(p / np.exp(r) - 1.0)))
    assert worst < 2.0**-13 and worst > 0.0, worst


def test_coarse_polynomial_error_bound_in_float64() -> None:
    """The degree-2 coefficients as shipped (float32), over the reduced range and a little past it:
    under 1.8e-3 of exp: with the 256 ulps at most that a bfloat16 value spans (8 bits) under 0.47
    ulp, so one rounding into bfloat16 stays within 1 ulp (but near the overflow threshold: the
    band test below). Not within float16's: 1.7e-3 of a value is up to 3.6 of its ulps, the reason
    float16 keeps the narrow exp. Fails for a fit 5% worse, or a float32 rounding of the shipped
    coefficients gone wrong."""
    r = np.linspace(-0.35, 0.35, 400_001)
    c = [2.0 * float(v) for v in kl_div._BRIEF]  # shipped halved (exactly): the exp is twice them
    p = (c[2] * r + c[1]) * r + c[0]
    worst = float(np.max(np.abs(p / np.exp(r) - 1.0)))
    assert 1.7e-3 < worst < 1.8e-3, worst


def test_sum_polynomial_error_bound_in_float64() -> None:
    """The sum formula's coefficients as shipped, over the reduced range and a little past it: under
    2.5e-7 of exp, so that with its reduction's 6.5e-7 (at |k| = 342) a term stays under 1e-6, a
    tenth of SEMANTICS' bar for a broadcast sum."""
    r = np.linspace(-0.35, 0.35, 400_001)
    p = np.zeros_like(r)
    for c in reversed(kl_div._SUM_HALVED):
        p = p * r + 2.0 * float(c)  # shipped halved (exactly): the exp is twice them
    worst = float(np.max(np.abs(p / np.exp(r) - 1.0)))
    assert worst < 2.5e-7 and worst > 0.0, worst


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
@pytest.mark.parametrize(("low", "high", "grad"), [(-80.0, 80.0, 1.0), (110.0, 150.0, 2.0**-126)])
def test_broadcast_sum_terms_within_the_bar_over_the_exp_range(
    dtype: torch.dtype, low: float, high: float, grad: float
) -> None:
    """Sums of 64 terms whose targets span the exp's range, none cancelling, so each output reads
    its terms' own relative error: from t = -80 to 80 with g = 1 (normal terms: a subnormal one
    carries fewer bits in any formula), and up to t = 150 (k = 216, where
    the one-fma reduction is off by 4e-7) with g the smallest normal float32, so that the product
    stays finite. Both within 1e-5 of the summed magnitudes (float32; the narrow exp's 1e-4 would
    not be), or within 1 ulp of the 16-bit output (bfloat16, whose 0-d gradient takes the narrow
    exp: the test below)."""
    rows, cols = 64, 1024
    t = torch.linspace(low, high, rows * cols, dtype=torch.float64).reshape(cols, rows).t().contiguous()
    g = torch.tensor(grad, dtype=torch.float64)
    t, g = t.to(dtype), g.to(dtype) if dtype != torch.bfloat16 else g.float()
    x = torch.zeros(1, cols, dtype=dtype)
    out = kernels.kl_div_backward(g, x, t, "sum", True, backend="cpu")
    ref = kl_div.reference(g, x, t, "sum", True)
    scale = (t.double().exp() * g.double()).abs().sum(0, keepdim=True)
    assert torch.isfinite(ref).all() and (ref.abs() == scale).all()  # finite, and nothing cancels
    assert_within(out, ref, 0.0 if dtype == torch.float32 else 1.0, rel_to=scale, rel=1e-5)


@pytest.mark.parametrize(("dtype", "take_coarse"), EXPS, ids=EXP_IDS)
@pytest.mark.parametrize("config", ["flat", "scalar_grad"])
def test_narrow_exp_within_one_ulp_on_every_16_bit_target(
    coarse: Callable[[bool], None], dtype: torch.dtype, take_coarse: bool, config: str
) -> None:
    coarse(take_coarse)
    t = _every_value(dtype)
    # g = -1: out = exp(t) itself, so the exp alone is measured, over its whole 16-bit range.
    g = torch.full((), -1.0, dtype=dtype) if config == "scalar_grad" else torch.full_like(t, -1.0)
    cfg = {"variant": config, "tile": 1024, "cores": 1}
    out = kernels.kl_div_backward(g, t, t, "sum", True, backend="cpu", config=cfg)
    assert_within(out, kl_div.reference(g, t, t, "sum", True), 1.0)


@pytest.mark.parametrize(("dtype", "take_coarse"), EXPS, ids=EXP_IDS)
def test_narrow_exp_within_one_ulp_in_the_strided_walk(
    coarse: Callable[[bool], None], dtype: torch.dtype, take_coarse: bool
) -> None:
    """Every 16-bit target again, as a transposed view: the strided and transposed walks of the
    elementwise layout run the narrow (or coarse) formula too."""
    coarse(take_coarse)
    t = _every_value(dtype).reshape(256, 256).t()
    # |g| in [1, 2), so exp(t) * g overflows float32 only where the exact value overflows the dtype
    # (bfloat16 reaches exp(88.8) = float32's max: its product with g < 1 would be float32's inf).
    gen = torch.Generator().manual_seed(3)
    g = ((torch.rand(256, 256, generator=gen) + 1.0) * torch.randn(256, 256, generator=gen).sign()).to(dtype)
    out = kernels.kl_div_backward(g, t, t, "sum", True, backend="cpu")
    assert_within(out, kl_div.reference(g, t, t, "sum", True), 1.0)


@pytest.mark.parametrize("dtype", SIXTEEN, ids=str)
def test_broadcast_sum_never_takes_the_narrow_exp_where_terms_cancel(dtype: torch.dtype) -> None:
    """Rows alternate t+ = -0.2470703125 (where the degree-3 exp reads 9.4e-5 high) with g = 1 and
    t- = -1.0390625 (1.0e-4 low) with g = -exp(t+ - t-): the terms cancel, their errors add up. The
    sum meets relative 1e-5 of the summed magnitudes only with the sum or float32 exp (the narrow one is
    off by about 1e-4 of them: this test fails if broadcast sums take Formula.narrow_value)."""
    rows, cols = 4096, 8
    plus, minus = -0.2470703125, -1.0390625
    t = torch.tensor([plus, minus], dtype=torch.float64).repeat(rows // 2)[:, None].repeat(1, cols).to(dtype)
    g = torch.tensor([1.0, -math.exp(plus - minus)], dtype=torch.float64).repeat(rows // 2)[:, None]
    g = g.repeat(1, cols).to(dtype)
    x = torch.zeros(1, cols, dtype=dtype)  # B = (rows, cols) is summed back to input's (1, cols)
    out = kernels.kl_div_backward(g, x, t, "sum", True, backend="cpu")
    ref = kl_div.reference(g, x, t, "sum", True)
    scale = (t.double().exp() * g.double()).abs().sum(0, keepdim=True)
    assert float((ref.abs() / scale).max()) < 0.01  # the case is one that cancels
    assert_within(out, ref, 1.0, rel_to=scale, rel=1e-5)


@pytest.mark.parametrize("dtype", SIXTEEN, ids=str)
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_one_value_gradient_sums_take_the_narrow_exp_within_one_ulp_on_every_16_bit_target(
    dtype: torch.dtype, reduction: str
) -> None:
    """Every 16-bit target once, summed 64 at a time (64 neighbouring bit patterns an output, so
    most outputs are finite), with a 0-d gradient, through the reduce walk's lanes: within 1 ulp
    of the float64 reference, and the backend's pick for them is the narrow loops (test_reduce
    checks that their bits are the narrow terms'); a gradient of many values keeps the sum loops."""
    every = _every_value(dtype)
    t = every.reshape(1024, 64).t().contiguous()  # output j sums patterns 64 j .. 64 j + 63
    x = torch.zeros(1, 1024, dtype=dtype)
    for g in (torch.tensor(-1.0, dtype=dtype), torch.tensor(0.75, dtype=dtype)):
        out = kernels.kl_div_backward(g, x, t, reduction, True, backend="cpu")
        ref = kl_div.reference(g, x, t, reduction, True)
        assert_within(out, ref, 1.0)
        finite = torch.isfinite(ref).sum()
        assert finite > 300, f"{finite} finite outputs"  # the test reads the exp over most of them
    backend = cpu.BACKEND
    for g, want in ((torch.tensor(0.5, dtype=dtype), (True, False)), (t.clone(), (False, True))):
        ex = aclnn.kl_div_backward_get_workspace_size(g, x, t, 1, True, torch.empty_like(x), backend="cpu")[1]
        picked = backend._loop_set(ex)[0]
        narrow, summed = backend.kernels(kl_div.FORMULA_LOG, True), backend.kernels(kl_div.FORMULA_LOG, summed=True)
        assert (picked is narrow, picked is summed) == want


@pytest.mark.parametrize("config", [{"variant": "scalar_grad", "tile": 1024, "cores": 1}, None], ids=["0-d", "strided"])
def test_the_coarse_switch_reaches_bfloat16_outs_of_elementwise_walks_alone(
    coarse: Callable[[bool], None], config: dict[str, object] | None
) -> None:
    """Every bfloat16 target through the contiguous loop (0-d gradient) and the transposed walk,
    with the backend's coarse switch off and on: the bits differ where the degree-2 exp rounds
    otherwise (it must reach the loops), by at most 1 ulp of each other. A float16 out, and a
    bfloat16 out of a one-value gradient's sum, keep the narrow formula's bits either way."""
    every = _every_value(torch.bfloat16)
    t = every if config is not None else every.reshape(256, 256).t()
    half = _every_value(torch.float16)
    summed_t = every.reshape(1024, 64).t().contiguous()
    g = torch.tensor(-0.75, dtype=torch.bfloat16)
    outs = []
    for on in (False, True):
        coarse(on)
        outs.append(
            (
                kernels.kl_div_backward(g, t, t, "sum", True, backend="cpu", config=config),
                kernels.kl_div_backward(g.half(), half, half, "sum", True, backend="cpu", config=config),
                kernels.kl_div_backward(g, torch.zeros(1, 1024, dtype=torch.bfloat16), summed_t, "sum", True),
            )
        )
    (narrow, f16_off, sum_off), (brief, f16_on, sum_on) = outs
    finite = narrow.isfinite() & brief.isfinite()
    differ = (narrow.view(torch.int16) != brief.view(torch.int16)) & finite
    # About 1 in 5 of the ~3800 targets whose exp is neither 1, 0 nor inf in bfloat16 (766 on the
    # contiguous loop): the switch reaches the loops.
    assert int(differ.sum()) > 300, int(differ.sum())
    steps = (narrow.view(torch.int16).int() - brief.view(torch.int16).int()).abs()[finite]
    assert int(steps.max()) == 1
    assert torch.equal(f16_off.view(torch.int16), f16_on.view(torch.int16))
    assert torch.equal(sum_off.view(torch.int16), sum_on.view(torch.int16))


# bfloat16's overflow threshold: exact values from it up round to inf, those under it to max.
_BF16_INF_AT = (2.0 - 2.0**-8) * 2.0**127


@pytest.mark.parametrize(("take_coarse", "band"), [(False, 1.1e-4), (True, 1.8e-3)], ids=["narrow", "coarse"])
def test_bfloat16_results_leave_one_ulp_only_in_their_exps_band_at_the_overflow_threshold(
    coarse: Callable[[bool], None], take_coarse: bool, band: float
) -> None:
    """Every bfloat16 target against every 0-d gradient of the top binade (both signs) and a few
    others, by sum (cof 1) and by mean (cof 2^-16), so that many exact values land near the
    overflow threshold T: the exp's relative error can carry the float32 result across T, and the
    one rounding then gives inf where the reference's gives the dtype's max, or the reverse. No exp
    short of a correctly rounded one avoids that, so SEMANTICS' 1 ulp cannot hold there; what holds
    is that it happens only where the exact value lies within the exp's own error of T (the narrow
    exp's 1.03e-4, the coarse one's 1.78e-3), and there the output is max or inf of the value's
    sign. Everywhere else: within 1 ulp."""
    coarse(take_coarse)
    t = _every_value(torch.bfloat16)
    top = torch.arange(0x7F00, 0x7F80, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)  # [2^127, max]
    grads = torch.cat([top, -top, torch.tensor([3.0, -0.75, 2.0**-100], dtype=torch.bfloat16)])
    # mean: cof 2^-16, so that gradients past the top binade reach T too.
    cases = [(g, "sum") for g in grads] + [(torch.tensor(v, dtype=torch.bfloat16), "mean") for v in (2.0**110, -1.0)]
    config = {"variant": "scalar_grad", "tile": 4096, "cores": 1}
    biggest = torch.finfo(torch.bfloat16).max
    near_seen = off_seen = 0
    for g, reduction in cases:
        out = kernels.kl_div_backward(g, t, t, reduction, True, backend="cpu", config=config)
        ref = kl_div.reference(g, t, t, reduction, True)
        near = (ref.abs() / _BF16_INF_AT - 1.0).abs() < band
        assert_within(out[~near], ref[~near], 1.0)
        edge = out[near].double()
        assert bool(((edge.abs() == biggest) | edge.isinf()).all() and (edge.sign() == ref[near].sign()).all())
        near_seen += int(near.sum())
        off_seen += int((edge.isinf() != ref[near].to(torch.bfloat16).isinf()).sum())
    # The test reads the band (in-band values met), and each exp does cross T inside its own band.
    assert near_seen > 20 and off_seen > 0, (near_seen, off_seen)


def _float16_grads(shape: tuple[int, ...]) -> torch.Tensor:
    """float16 gradients over the whole range, as ldexp_half's bound reads it: every binade from the
    smallest subnormal to 65504, both signs, and 0, inf, NaN."""
    gen = torch.Generator().manual_seed(9)
    n = math.prod(shape)
    mags = torch.exp2(torch.randint(-24, 16, (n,), generator=gen).double()) * (1.0 + torch.rand(n, generator=gen))
    g = (mags * torch.randn(n, generator=gen).sign()).to(torch.float16)
    g[:8] = torch.tensor([0.0, -0.0, math.inf, -math.inf, math.nan, 65504.0, 2.0**-24, -(2.0**-24)])
    return g.reshape(shape)


@pytest.mark.parametrize("reduction", ["sum", "mean", "batchmean"])
@pytest.mark.parametrize("config", ["flat", "scalar_grad", "strided"])
def test_float16_gradient_half_formula_gives_the_narrow_formulas_bits(reduction: str, config: str) -> None:
    """A float16 out of a float16 gradient takes Formula.half_value (one power of two for the
    scale, on hosts without vscalefps); a float32 gradient of the same values takes narrow_value.
    Every float16 target, gradients over their whole range (full and 0-d), cof from 1 to 2^-16:
    the same bits, the one-power scale losing nothing the result can show. (Against the reference,
    the tests above; with g = 65504 the degree-3 exp's 1e-4 can round a product just under 65520,
    float16's overflow threshold, up to inf in either formula.)"""
    t = _every_value(torch.float16)
    if config == "strided":
        t = t.reshape(256, 256).t()
    cfg = None if config == "strided" else {"variant": config, "tile": 1024, "cores": 1}
    full = [_float16_grads(tuple(t.shape))] if config != "scalar_grad" else []
    scalars = [torch.tensor(v, dtype=torch.float16) for v in (65504.0, -(2.0**-24), 1.0, math.inf)]
    grads = full + (scalars if config != "flat" else [])
    for g in grads:
        half = kernels.kl_div_backward(g, t, t, reduction, True, backend="cpu", config=cfg)
        narrow = kernels.kl_div_backward(g.float(), t, t, reduction, True, backend="cpu", config=cfg)
        assert torch.equal(half.view(torch.int16), narrow.view(torch.int16)), f"g {tuple(g.shape)} differs"


def test_only_formulas_with_a_narrow_or_sum_value_get_their_own_kernels_plumbing() -> None:
    """Which compiled loops the backend hands out (plumbing; the tests above check the values)."""
    backend = cpu.BACKEND
    wide, narrow = backend.kernels(kl_div.FORMULA_LOG, False), backend.kernels(kl_div.FORMULA_LOG, True)
    summed = backend.kernels(kl_div.FORMULA_LOG, summed=True)
    half = backend.kernels(kl_div.FORMULA_LOG, True, half=True)
    assert len({id(wide), id(narrow), id(summed)}) == 3
    # A 16-bit out of a one-value gradient's sum: the narrow loops, never the half ones.
    assert backend.kernels(kl_div.FORMULA_LOG, True, summed=True, half=True) is narrow
    # The half loops are their own only where ldexp takes more than one instruction (no AVX-512F).
    assert (half is narrow) is not cpu_loops.HALF_SCALE
    assert backend.kernels(kl_div.FORMULA_LOG, False, half=True) is wide  # half applies to narrow outs
    # The coarse loops are their own wherever asked for; sums and wide outs never take them.
    coarse = backend.kernels(kl_div.FORMULA_LOG, True, coarse=True)
    assert len({id(wide), id(narrow), id(summed), id(coarse)}) == 4
    assert backend.kernels(kl_div.FORMULA_LOG, True, summed=True, coarse=True) is narrow
    assert backend.kernels(kl_div.FORMULA_LOG, False, coarse=True) is wide
    plain = backend.kernels(kl_div.FORMULA, False)
    assert backend.kernels(kl_div.FORMULA, True) is plain and backend.kernels(kl_div.FORMULA, summed=True) is plain
    assert backend.kernels(kl_div.FORMULA, True, half=True) is plain
    assert backend.kernels(kl_div.FORMULA, True, coarse=True) is plain


_COARSE_PICK = "from kernels.backends import cpu; print(cpu.BACKEND.coarse)"
_COARSE_UNSET = ("LOSSTUNE_CPU_COARSE", "NUMBA_CPU_FEATURES")


@pytest.mark.parametrize(
    ("cpu_name", "switch", "expected"),
    [
        ("znver5", None, "True"),
        ("rocketlake", None, "True"),
        ("sapphirerapids", None, "False"),
        ("znver4", None, "False"),
        ("znver3", None, "False"),
        ("znver4", "1", "True"),
        ("znver5", "0", "False"),
    ],
)
def test_the_coarse_pick_follows_the_cpu_compiled_for_and_its_switch(
    cpu_name: str, switch: str | None, expected: str
) -> None:
    """Unset, the backend takes the coarse formula on the CPUs of cpu._COARSE_CPUS (the Zen 5 and
    the Xeon, LLVM's rocketlake) and nowhere else, read from numba's CPU (NUMBA_CPU_NAME), as every
    feature gate reads it; the switch says yes or no on any host."""
    env = {"NUMBA_CPU_NAME": cpu_name} | ({} if switch is None else {"LOSSTUNE_CPU_COARSE": switch})
    assert run_fresh(_COARSE_PICK, env, _COARSE_UNSET) == expected


def test_the_coarse_switch_refuses_anything_but_0_or_1_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pick reads its switch each time it is asked (a backend reads it once, when made)."""
    monkeypatch.setenv("LOSSTUNE_CPU_COARSE", "yes")
    with pytest.raises(ValueError, match="LOSSTUNE_CPU_COARSE: expected 0 or 1, got 'yes'"):
        cpu.coarse_offered()
