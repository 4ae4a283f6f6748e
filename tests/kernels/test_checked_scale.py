"""The loops apart (cpu_loops.TILES_APART) of a formula with or without a checked twin
(Formula.checked_value): a tile, or a walk's run, goes through the twin (KL log_target's scale by
one power of two, kernels/scalar.ldexp_checked) and again through the formula where any element's
flag was set. Whatever the flags, every stored bit must be the formula's: these build both sets of
loops from the op's own formulas and compare them bit for bit, on any host (the backend builds them
apart only without AVX-512F, but the loops are the same code everywhere): the contiguous loops, and
the strided and transposed walks through the op's own launch.
"""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
import torch
from numba import njit

import kernels
from kernels.backends import cpu, cpu_loops
from kernels.modes import Variant
from kernels.ops import kl_div, mse
from kernels.tiling import Tiling
from tests.helpers import as_bits, cached, run_fresh

LOG = kl_div.FORMULA_LOG
TILE = 1024
N = 48 * TILE + 37  # a short last tile, and two blocks' shares that end mid-tile


def _build(
    value: Callable[..., float],
    twin: Callable[..., tuple[float, bool]] | None,
    apart: bool,
    raw: bool = False,
    deferred: bool = False,
) -> cpu_loops.CpuKernels:
    """``raw``: the twin's raw flag and normal_run's store; ``deferred`` (with it): the deferred
    walk's whole tiles through the twin too (make_cpu_kernels' deferred_twin)."""
    if not raw:
        return cached(cpu_loops.make_cpu_kernels(value, LOG.compute_bound, twin, apart=apart))
    with pytest.MonkeyPatch.context() as patch:  # RAW_FLAG is read when the loops are built
        patch.setattr(cpu_loops, "RAW_FLAG", True)
        return cached(
            cpu_loops.make_cpu_kernels(
                value,
                LOG.compute_bound,
                twin,
                apart=apart,
                checked_range=LOG.checked_range,
                normal_low=LOG.normal_low,
                deferred_twin=deferred,
            )
        )


# The builds each test compares with the formula's own inlined loops ("plain"): each tile's element
# loop apart (cpu_loops.TILES_APART), by the formula alone and through its checked twin, on any host,
# and through the twin whose contiguous passes flag a 16-bit target's tile from its raw patterns
# (cpu_loops.RAW_FLAG). (A twin given to loops that are not apart goes unused in the elementwise
# loops, whose formula's own loops run; the reduce walk's lanes take it.)
BUILDS = ("apart", "apart checked", "apart raw")


@pytest.fixture(scope="module")
def builds() -> dict[str, dict[str, cpu_loops.CpuKernels]]:
    """The loops of the wide formula (float32 out), the narrow one (16-bit), the coarse one (bfloat16
    where the backend takes it) and the half one (float16 out of a float16 gradient, which has no
    twin) by BUILDS, plain first."""
    sets = {"wide": (LOG.value, LOG.checked_value), "narrow": (LOG.narrow_value, LOG.narrow_checked_value)}
    sets["coarse"] = (LOG.coarse_value, LOG.coarse_checked_value)
    sets["half"] = (LOG.half_value, None)
    out: dict[str, dict[str, cpu_loops.CpuKernels]] = {}
    for name, (value, twin) in sets.items():
        out[name] = {"plain": _build(value, None, False), "apart": _build(value, None, True)}
        if twin is not None:
            out[name]["apart checked"] = _build(value, twin, True)
            out[name]["apart raw"] = _build(value, twin, True, raw=True)
    return out


def _launch(
    kernels: cpu_loops.CpuKernels, g: torch.Tensor, t: torch.Tensor, out: torch.Tensor, cof: float, **cfg
) -> None:
    """One contiguous loop, called as CpuBackend.launch calls it (target standing in for self)."""
    cores, stream, ahead = cfg["cores"], cfg["stream"], cfg.get("ahead", 0)
    fn = (kernels.scalar_grad if g.dim() == 0 else kernels.flat)[cores > 1]
    if cores > 1:
        cpu_loops.set_threads(cores)
    tags = (cpu.TAGS[g.dtype], cpu.TAGS[t.dtype], cpu.TAGS[t.dtype], cpu.TAGS[out.dtype])
    fn(g.data_ptr(), t.data_ptr(), t.data_ptr(), out.data_ptr(), *tags, t.numel(), cof, TILE, ahead, cores, stream)


def _targets(dtype: torch.dtype) -> torch.Tensor:
    """Mostly ordinary log-probabilities, so most tiles take the twin alone; elements whose k leaves
    [-126, 127] (|t| past ~87, inf, NaN) inside a tile, at a tile's first element and at its last;
    one tile swept over the exp's whole range, where nearly every element is flagged. A flagged
    tile sends the next 16 of its block to the formula alone (cpu_loops._SKIP_TILES): the flags sit
    so that tiles take the twin before them, in the skipped run after them and after the run ends
    (tiles 2, 20, 37 and the last; a second block's share starts near tile 24)."""
    gen = torch.Generator().manual_seed(3)
    t = -torch.rand(N, generator=gen, dtype=torch.float64) * 30.0
    t[2 * TILE + 5] = 120.0
    t[20 * TILE : 21 * TILE] = torch.linspace(-800.0, 800.0, TILE, dtype=torch.float64)
    t[37 * TILE], t[38 * TILE - 1], t[N - 1] = -math.inf, -200.0, math.nan
    t[45 * TILE + 3] = math.inf
    return t.to(dtype)


def _grads(dtype: torch.dtype, full: bool) -> list[torch.Tensor]:
    """Full gradients over many binades (0, inf, NaN among them), or 0-d ones, small to large: with
    a float32 or bfloat16 gradient also ones that make some values subnormal (2^-110), whose
    normal_low is not negative at every cof (2^-126), a subnormal one (2^-130), and zero."""
    if not full:
        big = 2.0**100 if dtype is not torch.float16 else 60000.0
        tiny = () if dtype is torch.float16 else (-(2.0**-110), 2.0**-126, 2.0**-130, 0.0)
        return [torch.tensor(v, dtype=dtype) for v in (1.0, -2.5, big, 2.0**-14, *tiny)]
    gen = torch.Generator().manual_seed(4)
    top = 15 if dtype is torch.float16 else 120
    g = torch.exp2(torch.randint(-top, top, (N,), generator=gen).double()) * torch.randn(
        N, generator=gen, dtype=torch.float64
    )
    g[:4] = torch.tensor([0.0, math.inf, math.nan, -0.0], dtype=torch.float64)
    return [g.to(dtype)]


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    view = torch.int32 if a.dtype is torch.float32 else torch.int16
    return torch.equal(a.view(view), b.view(view))


CASES = [
    ("wide", torch.float32, torch.float32),
    ("narrow", torch.bfloat16, torch.bfloat16),
    ("coarse", torch.bfloat16, torch.bfloat16),
    ("narrow", torch.float16, torch.float16),
    ("narrow", torch.float16, torch.float32),  # a float32 gradient with a float16 out (SEMANTICS allows it)
    ("half", torch.float16, torch.float16),
]


@pytest.mark.parametrize("loops", BUILDS)
@pytest.mark.parametrize(("build", "out_dtype", "grad_dtype"), CASES, ids=lambda v: str(v).replace("torch.", ""))
@pytest.mark.parametrize("full", [True, False], ids=["full", "0d"])
@pytest.mark.parametrize(("cores", "stream", "ahead"), [(1, False, 0), (2, True, TILE)])
def test_checked_and_apart_loops_store_the_formulas_bits(
    builds, loops, build, out_dtype, grad_dtype, full, cores, stream, ahead
) -> None:
    if loops not in builds[build]:
        pytest.skip(f"the {build} formula has no checked twin")
    plain, other = builds[build]["plain"], builds[build][loops]
    t = _targets(out_dtype)
    for g in _grads(grad_dtype, full):
        for cof in (1.0, 1.0 / N, 2.0**-40, 1.0 / 3.0):
            want, got = torch.empty_like(t), torch.empty_like(t)
            _launch(plain, g, t, want, cof, cores=cores, stream=stream, ahead=ahead)
            _launch(other, g, t, got, cof, cores=cores, stream=stream, ahead=ahead)
            assert _same_bits(got, want), f"g {tuple(g.shape)} cof {cof}: {(got != want).sum()} elements differ"


@pytest.mark.parametrize("loops", BUILDS)
def test_every_sixteen_bit_target_through_the_checked_and_apart_loops(builds, loops) -> None:
    """All 65536 float16 and bfloat16 targets (bfloat16 by the narrow and the coarse formula), each
    tile mixing flagged and unflagged elements, at cof's exponent at both ends of its range (1 and
    2^-62) and between; bfloat16 also with 0-d gradients that make some values subnormal (-2^-110)
    or leave no t around 0 whose value is normal at any of these cofs (2^-126: Formula.normal_low
    not negative)."""
    for name, dtype in (("narrow", torch.float16), ("narrow", torch.bfloat16), ("coarse", torch.bfloat16)):
        plain, other = builds[name]["plain"], builds[name][loops]
        t = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype)
        tiny = [torch.tensor(v, dtype=dtype) for v in (-(2.0**-110), 2.0**-126)] if dtype is torch.bfloat16 else []
        for g in (torch.tensor(1.25, dtype=dtype), torch.full((t.numel(),), -3.0, dtype=dtype), *tiny):
            for cof in (1.0, 2.0**-16, 2.0**-62):
                want, got = torch.empty_like(t), torch.empty_like(t)
                _launch(plain, g, t, want, cof, cores=1, stream=False)
                _launch(other, g, t, got, cof, cores=1, stream=False)
                assert _same_bits(got, want), (name, dtype, cof)


_range = njit(LOG.checked_range)


@njit
def _limits_of(t, cof):
    lo, hi = _range(cof)
    return cpu_loops._half_limits(t, np.float32(lo), np.float32(hi))


def _values(dtype: torch.dtype) -> torch.Tensor:
    """Every pattern of a 16-bit dtype, by pattern (0 .. 65535), as float64 values."""
    return torch.arange(2**16, dtype=torch.int32).to(torch.int16).view(dtype).double()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_the_raw_limits_hold_every_t_the_twin_takes_and_no_other(dtype: torch.dtype) -> None:
    """The twin's range (kl_div._twin_range) and its patterns (cpu_loops._half_limits), for every
    exponent cof can have and two cofs that are not powers of two: every pattern within the limits
    is a t the twin scales exactly (k = round(t * log2e) + 1 + shift in [-126, 127], t * log2e
    exact in float64 for a 16-bit t, rounded half to even as the fma does), and the limits are the
    extreme patterns whose values lie in the range (not the NaN, the infinities or anything past)."""
    values = _values(dtype)
    pattern = torch.arange(2**16, dtype=torch.int64)
    log2e = float(np.float32(1.4426950408889634))
    array = np.zeros(1, np.int16 if dtype is torch.float16 else np.uint16)  # the loops' view of t (cpu.TAGS)
    for cof in [2.0**e for e in range(-63, 1)] + [1.0 / 3.0, 1.0 / N]:
        shift = math.frexp(cof)[1]
        lo, hi = (float(v) for v in LOG.checked_range(np.float32(cof)))
        neg, pos = (int(v) for v in _limits_of(array, np.float32(cof)))
        inside = (pattern <= pos) | ((pattern >= 0x8000) & (pattern <= neg))  # pos as signed, neg as unsigned
        k = torch.round(values[inside] * log2e) + 1 + shift
        assert bool(((k >= -126) & (k <= 127)).all()), cof
        finite = values.isfinite()
        assert bool((inside == (finite & (values >= lo) & (values <= hi))).all()), cof
        # Conservative by a quarter of a k at each end and the pattern's own step (bfloat16's 1.0
        # below 256 is 1.44 in k): the t the twin takes reach within that of both ends of k's range.
        k_real = values[inside] * log2e + 1 + shift
        assert float(k_real.max()) > 125.0 and float(k_real.min()) < -124.0, cof


_normal_low = njit(LOG.normal_low)


def _smallest_value_of(twin: Callable[..., tuple[float, bool]]) -> Callable[..., tuple[float, bool]]:
    compiled = njit(twin)

    @njit
    def smallest(ts, g, cof, lo, hi):
        """The smallest |value| of the twin over the t of ``ts`` in [lo, hi], and whether any of
        them was flagged."""
        least, flagged = np.float32(np.inf), False
        for t in ts:
            if lo <= t <= hi:
                v, bad = compiled(g, t, t, cof)
                least = min(least, abs(v))
                flagged |= bad
        return least, flagged

    return smallest


@pytest.mark.parametrize("twin", ["narrow", "coarse"])
def test_normal_low_leaves_no_subnormal_value_and_is_near_tight(twin: str) -> None:
    """Formula.normal_low against the narrow and the coarse twin themselves (one bound for both: their
    exps' p/2 both lie in [0.35, 0.71]), over every finite bfloat16 target: for 0-d
    gradients from the least subnormal to 2^127 (powers of two and 1.5 times them, both signs) and
    every exponent cof can have, each t in [max(lo, normal_low), hi] (lo, hi: the twin's range) has a
    value that is zero or normal (>= 2^-126) and no flag: what cpu_loops' raw flag pass relies on
    when it stores such a bfloat16 out unfixed. Where the bound is above lo and below 0 it costs at
    most a few binades: the least value taken is under 2^-122. A zero gradient keeps the whole
    range; normal_low reaches 0 only where |g * cof| is under 2^-124."""
    smallest = _smallest_value_of({"narrow": LOG.narrow_checked_value, "coarse": LOG.coarse_checked_value}[twin])
    ts = torch.arange(2**16, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).float().numpy()
    ts = ts[np.isfinite(ts)]
    grads = [m * 2.0**e for e in range(-149, 128, 3) for m in (1.0, -1.5) if m * 2.0**e < 3e38]
    assert float(_normal_low(np.float32(1.0), np.float32(0.0))) == -math.inf
    for cof in [2.0**e for e in range(-63, 1, 2)] + [1.0 / 3.0]:
        lo, hi = (np.float32(v) for v in LOG.checked_range(np.float32(cof)))
        for g in grads:
            low = _normal_low(np.float32(cof), np.float32(g))
            if low >= 0:
                assert abs(g * cof) < 2.0**-124, (g, cof)
                continue
            least, flagged = smallest(ts, np.float32(g), np.float32(cof), max(lo, low), hi)
            assert not flagged and least >= 2.0**-126, (g, cof, least)
            if low > lo:
                assert least < 2.0**-122, (g, cof, least)


@pytest.mark.parametrize(("cpu_name", "expected"), [("znver5", "True"), ("znver4", "False"), ("znver3", "False")])
def test_the_raw_flag_follows_the_cpu_compiled_for(cpu_name: str, expected: str) -> None:
    """Unset, the raw flag is on for the CPUs of _RAW_FLAG_CPUS (the Zen 5) and off elsewhere, the
    AVX2 hosts where the twin also runs among them; the CPU is numba's (NUMBA_CPU_NAME), as every
    feature gate reads it."""
    code = "from kernels.backends import cpu_loops; print(cpu_loops.RAW_FLAG)"
    unset = ("LOSSTUNE_CPU_RAW_FLAG", "NUMBA_CPU_FEATURES")
    assert run_fresh(code, {"NUMBA_CPU_NAME": cpu_name}, unset) == expected


def _bf16_subnormal(v: torch.Tensor) -> torch.Tensor:
    bits = v.view(torch.int16).int() & 0x7FFF
    return (bits > 0) & (bits < 0x0080)


@pytest.mark.parametrize("formula", ["narrow", "coarse"])
@pytest.mark.parametrize("loops", BUILDS)
def test_subnormal_bfloat16_outs_through_the_twins_unfixed_store(
    builds, monkeypatch: pytest.MonkeyPatch, loops: str, formula: str
) -> None:
    """Where the host has AVX512-BF16 the twins store bfloat16 without the subnormal fix-up and flag
    the nonzero subnormals (cpu_loops._store_or_flag), so their tile or run is redone by the formula
    (a 0-d gradient's raw build: held to Formula.normal_low instead, cpu_loops.normal_run).
    Targets whose outputs cross 2^-126 while k stays in [-126, 127] (g * cof = 2^-40, t in [-64, -55]):
    some tiles and runs hold subnormal outputs, some do not; every bit the formula's, contiguous
    (0-d and full gradients, 1 and 2 cores) and through the transposed and broadcast walks; the
    narrow formula and the coarse one."""
    plain, other = builds[formula]["plain"], builds[formula][loops]
    t = torch.linspace(-64.0, -55.0, N, dtype=torch.float64)
    t[: 8 * TILE] = -30.0  # tiles with no subnormal output (the twin's alone)
    t = t.to(torch.bfloat16)
    for g in (torch.tensor(1.0, dtype=torch.bfloat16), torch.full((N,), -1.0, dtype=torch.bfloat16)):
        for cores in (1, 2):
            want, got = torch.empty_like(t), torch.empty_like(t)
            _launch(plain, g, t, want, 2.0**-40, cores=cores, stream=cores > 1, ahead=0)
            _launch(other, g, t, got, 2.0**-40, cores=cores, stream=cores > 1, ahead=0)
            assert _bf16_subnormal(want).sum() > 100 and (want != 0).all()
            assert _same_bits(got, want), f"{(got.view(torch.int16) != want.view(torch.int16)).sum()} differ"
    tw = torch.linspace(-64.0, -55.0, 64 * 5000, dtype=torch.float64).reshape(5000, 64).to(torch.bfloat16)
    g = torch.full((64, 5000), 2.0**-40, dtype=torch.bfloat16)
    for want, got in _through_the_walks(builds, monkeypatch, loops, g, tw, "none", formula):
        assert _bf16_subnormal(want).sum() > 100
        assert torch.equal(as_bits(got), as_bits(want))


def _through_the_walks(
    builds,
    monkeypatch: pytest.MonkeyPatch,
    loops: str,
    g: torch.Tensor,
    tw: torch.Tensor,
    reduction: str,
    formula: str = "narrow",
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(the plain build's out, ``loops``' out) of the narrow (or coarse) formula through the strided
    config's transposed walk (target ``tw.t()``) and its broadcast rows (that target's first row
    over all), the build standing in for every 16-bit formula the backend may pick."""
    summed = cpu.BACKEND.kernels(LOG, summed=True)
    config = Tiling(tile=4096, cores=min(2, cpu_loops.max_threads()), variant=Variant.STRIDED)
    rows, cols = tw.shape[1], tw.shape[0]
    x = torch.zeros((rows, cols), dtype=tw.dtype)
    targets = (tw.t(), tw.t()[:1].contiguous().expand(rows, cols))
    outs = []
    for build in ("plain", loops):
        narrow = builds[formula][build]
        monkeypatch.setitem(cpu.BACKEND._kernels, LOG.name, (narrow, narrow, summed, narrow, narrow, narrow, narrow))
        outs.append([kernels.kl_div_backward(g, x, t, reduction, True, config=config) for t in targets])
    return list(zip(*outs, strict=True))


@pytest.mark.parametrize("formula", ["narrow", "coarse"])
@pytest.mark.parametrize("loops", ["apart checked", "apart raw"])
def test_subnormal_bfloat16_outs_through_the_walks_runs_with_a_one_value_gradient(
    builds, monkeypatch: pytest.MonkeyPatch, loops: str, formula: str
) -> None:
    """The transposed and broadcast walks' runs with a 0-d gradient: where the loops flag from the
    raw patterns, a bfloat16 run of a 16-bit target is held to Formula.normal_low and stored
    unfixed (cpu_loops' normal_run). Targets whose values cross 2^-126 (g * cof = 2^-40 and 2^-110,
    t in [-64, -55] and [-20, 0]), with a gradient that leaves no t around 0 whose value is normal
    (2^-130, a subnormal one: every run flagged), and zero: every bit the formula's."""
    cases = [(-(2.0**-40), -64.0, -55.0), (2.0**-110, -20.0, 0.0), (2.0**-130, -8.0, 0.5), (0.0, -64.0, -55.0)]
    for g, lo, hi in cases:
        tw = torch.linspace(lo, hi, 64 * 5000, dtype=torch.float64).reshape(5000, 64).to(torch.bfloat16)
        grad = torch.tensor(g, dtype=torch.bfloat16)
        for want, got in _through_the_walks(builds, monkeypatch, loops, grad, tw, "sum", formula):
            assert g == 0.0 or _bf16_subnormal(want).sum() > 100, g
            assert torch.equal(as_bits(got), as_bits(want)), g


def _log_targets(shape: tuple[int, int], dtype: torch.dtype) -> torch.Tensor:
    """Log-targets of ``shape``, mostly ordinary, with flagged elements (past the twin's range,
    infinite, NaN, a sweep over the exp's range) in a few places, so some runs and tiles take the
    twin alone, some the formula after it and some the formula alone (the skip after a flagged one).
    A single row keeps its last fifth unflagged (a broadcast row's second run)."""
    gen = torch.Generator().manual_seed(5)
    t = -torch.rand(shape, generator=gen, dtype=torch.float64) * 30.0
    flat, n = t.view(-1), t.numel()
    flat[n // 5], flat[n // 2], flat[3 * n // 4] = 120.0, -math.inf, math.nan
    sweep = min(n // 8, 256)
    flat[n // 3 : n // 3 + sweep] = torch.linspace(-800.0, 800.0, sweep, dtype=torch.float64)
    if shape[0] > 1:
        flat[n - 1] = math.inf
    return t.to(dtype)


# (rows, cols) of out; each has a transposed form (the inputs' views of (cols, rows)) and a broadcast
# form (the target one row over the rows): runs of 300 and 4096-element tiles of 5000 go apart in
# the strided walk, runs of 100 stay inline (cpu_loops._APART_RUN).
WALK_SHAPES = ((64, 300), (40, 100), (130, 77), (64, 5000))
assert cpu_loops._APART_RUN in range(101, 301)


@pytest.mark.parametrize("twin", ["apart checked", "apart raw"])
@pytest.mark.parametrize("grad", ["full", "0-d", "row"])
@pytest.mark.parametrize(
    ("out_dtype", "grad_dtype"),
    [
        (torch.float32, torch.float32),
        (torch.bfloat16, torch.bfloat16),
        (torch.float16, torch.float16),  # the half formula, no twin
        (torch.float16, torch.float32),  # the narrow formula's twin
    ],
    ids=str,
)
def test_walks_apart_store_the_formulas_bits(
    builds, monkeypatch: pytest.MonkeyPatch, out_dtype: torch.dtype, grad_dtype: torch.dtype, grad: str, twin: str
) -> None:
    """The strided walk's runs and the transposed walk's pass (a) apart, through the twin where
    the build has one (its runs flagged per element, or from a 16-bit target's raw patterns),
    against the formula's inlined walks: the same bits, the op's own launch (2 cores) with each
    set of loops in the backend, on any host."""

    def outs(build: str) -> list[torch.Tensor]:
        _use_builds(builds, build, monkeypatch)
        config = Tiling(tile=4096, cores=min(2, cpu_loops.max_threads()), variant=Variant.STRIDED)
        got = []
        for rows, cols in WALK_SHAPES:
            t = _log_targets((cols, rows), out_dtype)
            gen = torch.Generator().manual_seed(rows + cols)
            g = {
                "full": torch.randn((rows, cols), generator=gen) * 4.0,
                "0-d": torch.tensor(-2.5),
                "row": torch.randn(cols, generator=gen),  # stride 0 along the rows: the ANY runs
            }[grad].to(grad_dtype)
            x = torch.zeros((rows, cols), dtype=out_dtype)  # KL log_target never reads self
            got.append(kernels.kl_div_backward(g, x, t.t(), "none", True, config=config))
            row = _log_targets((1, cols), out_dtype).expand(rows, cols)
            got.append(kernels.kl_div_backward(g, x, row, "none", True, config=config))
        return got

    want, got = outs("plain"), outs(twin)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(as_bits(a), as_bits(b)), (WALK_SHAPES[i // 2], ("transposed", "broadcast")[i % 2])


def _use_builds(builds, build: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend's KL log_target loops set to ``build`` (BUILDS, or "plain") for each formula,
    the formula's own apart build where it has no twin; the summed loops the backend's."""
    summed = cpu.BACKEND.kernels(LOG, summed=True)
    sets = {}
    for name in ("wide", "narrow", "half", "coarse"):
        loops = builds[name]
        sets[name] = loops["plain"] if build == "plain" else loops.get(build, loops["apart"])
    chosen = (sets["wide"], sets["narrow"], summed, sets["half"], sets["coarse"], sets["narrow"], sets["coarse"])
    monkeypatch.setitem(cpu.BACKEND._kernels, LOG.name, chosen)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_every_sixteen_bit_target_through_the_walks_raw_runs(
    builds, monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    """All 65536 targets of a 16-bit dtype through the walks' twin runs with the raw-pattern flag:
    transposed (64 x 1024 views of 1024 x 64 operands, as the report's layout, so each tile of
    pass (a) is one run) and broadcast (one row of all of them over 2 rows), a full gradient and a
    0-d one by sum (cof 1) and by mean (cof 2^-16 and 2^-17, which move the twin's range), against
    the inlined walks: the same bits. With the tile flag dropped from the raw runs the float16 case
    fails; the bfloat16 one did not, before normal_run: where its twin leaves the range it stores
    subnormals (large t) or sits in a run with t near -88, whose outputs are subnormal, and its
    store's own flag redoes the run (_store_or_flag; a 0-d gradient's runs now take normal_run,
    which has none). The walks' test above, one such element a run, fails then."""
    t = torch.arange(2**16, dtype=torch.int32).to(torch.int16).view(dtype)
    # A float16 out takes the narrow formula's twin with a float32 gradient (with a float16 one, the
    # half formula, which has none); a bfloat16 out with its own.
    grad_dtype = torch.float32 if dtype is torch.float16 else dtype
    config = Tiling(tile=4096, cores=min(2, cpu_loops.max_threads()), variant=Variant.STRIDED)

    def outs(build: str) -> list[torch.Tensor]:
        _use_builds(builds, build, monkeypatch)
        got = []
        for target, like in ((t.view(1024, 64).t(), lambda a: a.t()), (t.view(1, -1).expand(2, -1), lambda a: a)):
            x = like(torch.zeros(like(target).shape, dtype=dtype))
            g = like(torch.full(like(target).shape, -3.0, dtype=grad_dtype))
            got.append(kernels.kl_div_backward(g, x, target, "none", True, config=config))
            for reduction in ("sum", "mean"):
                g0 = torch.tensor(1.25, dtype=grad_dtype)
                got.append(kernels.kl_div_backward(g0, x, target, reduction, True, config=config))
        return got

    want, got = outs("plain"), outs("apart raw")
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(as_bits(a), as_bits(b)), i


@pytest.fixture(scope="module")
def sum_builds() -> dict[str, cpu_loops.CpuKernels]:
    """The sum formula's loops without its twin (each block of the reduce walk's lanes summed by the
    formula, "plain") and with it ("checked")."""
    return {"plain": _build(LOG.sum_value, None, True), "checked": _build(LOG.sum_value, LOG.sum_checked_value, True)}


# Where the twin flags: a log-target of -inf (a zero probability), t past the exp's range, NaN. With
# 256 lanes a block and two cores (6000 lanes each): the first core's block 2 flags, 3-18 take the
# formula alone (a flag at block 7 inside that window), 19 and 20 the twin again, 21 flags; the
# second core's 0-10 keep the twin's sums, 11 flags (its skip runs to the end of its share, past
# another flag).
FLAGGED = {(5, 600): -math.inf, (2, 2000): 200.0, (3, 5386): math.inf, (9, 8821): math.nan, (0, 11999): -200.0}


# float16 stands for bfloat16 (the same loops, other conversions): each dtype compiles four walks.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_reduce_walk_lanes_through_the_twin_store_the_formulas_bits(
    builds, sum_builds, monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    """KL log_target's summed layout (input one row of 12000 against target's 16 rows) through the
    reduce walk's unit-stride lanes, 256 lanes a block on two cores: summed by the twin, a flagged
    block again by the formula and the next _SKIP_TILES blocks by the formula alone, the same bits
    as the formula's sums. Each core's first blocks hold no flagged target (the twin's sums kept),
    later ones do, and the first core takes the twin again after its skip (FLAGGED). Full and 0-d
    gradients (sum and mean); a 16-bit out of the 0-d one takes the narrow formula's loops, the
    rest the sum formula's. With the redo dropped, this test fails."""
    gen = torch.Generator().manual_seed(21)
    rows, cols = 16, 12000
    t = torch.randn(rows, cols, generator=gen, dtype=torch.float64) * 3.0
    for at, v in FLAGGED.items():
        t[at] = v
    t = t.to(dtype)
    x = torch.zeros(1, cols, dtype=dtype)
    grads = [
        (torch.randn(rows, cols, generator=gen).to(dtype), "none"),
        (torch.tensor(-1.5, dtype=dtype), "sum"),
        (torch.tensor(0.75, dtype=dtype), "mean"),
    ]

    def outs(build: str) -> list[torch.Tensor]:
        narrow = builds["narrow"]["plain" if build == "plain" else "apart checked"]
        summed = sum_builds[build]
        chosen = (builds["wide"]["plain"], narrow, summed, narrow, narrow, narrow, narrow)
        monkeypatch.setitem(cpu.BACKEND._kernels, LOG.name, chosen)
        config = Tiling(tile=256, cores=min(2, cpu_loops.max_threads()), variant=Variant.REDUCE)
        return [kernels.kl_div_backward(g, x, t, red, True, config=config) for g, red in grads]

    want, got = outs("plain"), outs("checked")
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert torch.equal(as_bits(a), as_bits(b)), i


def test_a_transposed_tile_of_one_strided_row_stays_inline(builds, monkeypatch: pytest.MonkeyPatch) -> None:
    """The transposed walk's pass (a) goes apart only where its tile is one run at unit strides: a
    tile of one row (out's 65 columns are the walk's rows, 64 a float32 tile: the last tile's)
    whose gradient steps by 2 along the run, or whose target does, is one run too, and must take
    the strided loop (the same bits as the inlined walk's, which a unit-stride call would not give)."""
    rows, cols = 129, 65
    gen = torch.Generator().manual_seed(9)
    t = _log_targets((cols, rows), torch.float32).t()  # unit stride along the rows, as the inputs
    t2 = _log_targets((cols, 2 * rows), torch.float32)[:, ::2].t()  # stride 2 along the rows
    g = torch.randn((cols, 2 * rows), generator=gen)[:, ::2].t()  # stride 2 along the rows
    x = torch.zeros((rows, cols))
    config = Tiling(tile=4096, cores=min(2, cpu_loops.max_threads()), variant=Variant.STRIDED)
    summed = cpu.BACKEND.kernels(LOG, summed=True)
    outs = []
    for build in ("plain", "apart checked"):
        wide = builds["wide"][build]
        monkeypatch.setitem(cpu.BACKEND._kernels, LOG.name, (wide, wide, summed, wide, wide, wide, wide))
        outs.append(
            [
                kernels.kl_div_backward(a, x, b, "none", True, config=config)
                for a, b in ((g, t), (g.t().contiguous().t(), t2))
            ]
        )
    for want, got in zip(*outs, strict=True):
        assert torch.equal(as_bits(got), as_bits(want))


# The deferred walk's whole tiles through the twin (make_cpu_kernels' deferred_twin) need its order
# (cpu_loops.DEFERRED offers it in the space; the build is there on any host) and normal_run's
# bfloat16 store (AVX512-BF16: cpu_loops._normal_types); elsewhere the build's tiles keep the formula.
NEEDS_NORMAL_RUN = pytest.mark.skipif(not cpu_loops.HAS_BF16, reason="normal_run's store needs AVX512-BF16")
DEFERRED_WALK = Tiling(tile=4096, cores=1, variant=Variant.STRIDED, defer_out=True)


def _deferred_walk(kernels_: cpu_loops.CpuKernels, monkeypatch: pytest.MonkeyPatch, g, t, reduction, **knobs):
    """KL log_target of a bfloat16 transposed target ``t`` through the deferred walk of ``kernels_``
    (standing in for every set the backend may pick), DEFERRED_WALK with ``knobs``."""
    summed = cpu.BACKEND.kernels(LOG, summed=True)
    monkeypatch.setitem(cpu.BACKEND._kernels, LOG.name, (kernels_,) * 2 + (summed,) + (kernels_,) * 4)
    config = dataclasses.replace(DEFERRED_WALK, **knobs)
    return kernels.kl_div_backward(g, torch.zeros(t.shape, dtype=t.dtype), t, reduction, True, config=config)


@NEEDS_NORMAL_RUN
@pytest.mark.parametrize("formula", ["narrow", "coarse"])
def test_the_deferred_walks_whole_tiles_through_the_twin_store_the_formulas_bits(
    builds, monkeypatch: pytest.MonkeyPatch, formula: str
) -> None:
    """The deferred transposed walk with a 0-d gradient, its whole tiles through the twin inline
    (normal_run's loop, the held rows stored between its pieces), against the formula's inlined
    walk: ordinary log-targets with flagged ones among them (some tiles take the twin alone, some
    the formula after it, some the formula alone in the skip after a flag), and targets whose
    outputs cross 2^-126 (tiles held to normal_low); gradients that move normal_low (2^-110, a
    subnormal 2^-130, 0), by sum and by mean; 1 and 2 cores, streamed and not. The same bits."""
    value, twin = {
        "narrow": (LOG.narrow_value, LOG.narrow_checked_value),
        "coarse": (LOG.coarse_value, LOG.coarse_checked_value),
    }[formula]
    deferred = _build(value, twin, True, raw=True, deferred=True)
    plain = builds[formula]["plain"]
    # As the report's transposed layout: 64 x 8192 views of 8192 x 64 operands, 64 whole tiles.
    ordinary = _log_targets((8192, 64), torch.bfloat16).t()
    cases = [
        (ordinary, g, red) for g, red in ((1.25, "sum"), (-3.0, "mean"), (-(2.0**-110), "sum"), (2.0**-130, "sum"))
    ]
    # Targets whose outputs cross 2^-126, as the walks' runs' test above has them, falling, so that
    # the tiles before the first flag take the twin; 2^-130 leaves no t whose output is normal, so
    # its every tile must be flagged (normal_low not below 0), its first ones, all t > 0, too.
    for g, lo, hi in (
        (-(2.0**-40), -64.0, -55.0),
        (2.0**-110, -20.0, 0.0),
        (2.0**-130, -8.0, 0.5),
        (0.0, -64.0, -55.0),
    ):
        crossing = torch.linspace(hi, lo, 64 * 8192, dtype=torch.float64).to(torch.bfloat16).view(8192, 64).t()
        cases.append((crossing, g, "sum"))
    for t, g, reduction in cases:
        grad = torch.tensor(g, dtype=torch.bfloat16)
        for cores, stream in ((1, False), (min(2, cpu_loops.max_threads()), True)):
            want = _deferred_walk(plain, monkeypatch, grad, t, reduction, cores=cores, stream=stream)
            got = _deferred_walk(deferred, monkeypatch, grad, t, reduction, cores=cores, stream=stream)
            differ = (as_bits(got) != as_bits(want)).sum()
            assert torch.equal(as_bits(got), as_bits(want)), f"g {g} {reduction}, {cores} cores: {differ} differ"


@NEEDS_NORMAL_RUN
def test_the_deferred_walks_whole_tiles_take_the_twin_and_its_other_tiles_the_formula_plumbing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Which tiles of the deferred walk take the twin, seen through a stand-in twin that stores 7
    for every element (flagging none): with deferred_twin, every whole tile but each block's first
    (whose rows have no held tile to follow, and so take the formula's pass as before) holds 7s
    alone, and every other element is the formula's; without it, none is 7. 64 whole tiles of 128 x
    64 bfloat16 elements (a 4096-element float32 tile's 16 KiB), 1 and 2 blocks."""

    def marker(g, x, t, cof):
        return np.float32(7.0), False

    with_twin = _build(LOG.narrow_value, marker, True, raw=True, deferred=True)
    without = _build(LOG.narrow_value, marker, True, raw=True, deferred=False)
    gen = torch.Generator().manual_seed(6)
    # Ordinary log-targets only, none outside the twin's range: no tile is flagged.
    t = (-1.0 - torch.rand((8192, 64), generator=gen) * 29.0).to(torch.bfloat16).t()
    tile = 128 * 64
    g = torch.tensor(1.0, dtype=torch.bfloat16)
    for cores in (1, 2):
        want = _deferred_walk(without, monkeypatch, g, t, "sum", cores=cores, stream=cores > 1)
        got = _deferred_walk(with_twin, monkeypatch, g, t, "sum", cores=cores, stream=cores > 1)
        assert not (want == 7.0).any()
        sevens = got == 7.0
        assert int(sevens.sum()) == (t.numel() // tile - cores) * tile, cores
        assert torch.equal(as_bits(got[~sevens]), as_bits(want[~sevens]))


def test_the_backend_takes_the_twins_where_ldexp_is_three_powers_or_the_cpu_is_listed_plumbing() -> None:
    """Which loops the backend builds (plumbing; the tests above check the values): the twins'
    contiguous loops where cpu_loops.CHECKED_SCALE (no vscalefps, or a CPU of _CHECKED_CPUS; with
    vscalefps only the 16-bit outputs' loops) and the sums' loops, the formula's own elsewhere, and
    never for the float16-gradient half formula, which has no twin."""
    if os.environ.get("LOSSTUNE_CPU_CHECKED") is None:
        listed = cpu_loops.target_cpu() in cpu_loops._CHECKED_CPUS
        assert cpu_loops.CHECKED_SCALE is (not cpu_loops.HAS_SCALEF or listed)
    assert kl_div.FORMULA.checked_value is None and kl_div.FORMULA.narrow_checked_value is None
    given: list[tuple[Callable[..., float], object]] = []
    ranges: dict[Callable[..., float], object] = {}
    raw_asked: list[tuple[Callable[..., float], object, object, object, object, object]] = []

    class Spy:  # the loops module, with make_cpu_kernels recording the twin each build is given
        def __getattr__(self, name: str) -> object:
            return getattr(cpu_loops, name)

        @staticmethod
        def make_cpu_kernels(
            value, compute_bound, checked_py=None, apart=None, checked_range=None, normal_low=None, raw_flag=None
        ):
            if raw_flag is not None:  # the bfloat16 outs' twin (cpu.checked_bf16_offered), apart
                raw_asked.append((value, checked_py, apart, checked_range, normal_low, raw_flag))
                return "raw loops of " + value.__name__
            given.append((value, checked_py))
            ranges[value] = (checked_range, normal_low)
            return "loops of " + value.__name__

    backend = cpu.CpuBackend(Spy())  # type: ignore[arg-type]
    for narrow, summed, half in ((False, False, False), (True, False, False), (True, False, True)):
        backend.kernels(LOG, narrow, summed=summed, half=half)
    backend.kernels(LOG, True, coarse=True)
    backend.kernels(LOG, summed=True)
    backend.kernels(LOG, True, checked_bf16=True)
    twins = dict(given)
    on = cpu_loops.CHECKED_SCALE
    wide_inline = on and cpu_loops.HAS_SCALEF  # the Zen 5: float32 outs keep the formula's own loops
    assert twins[LOG.value] is (LOG.checked_value if on and not wide_inline else None)
    assert twins[LOG.narrow_value] is (LOG.narrow_checked_value if on else None)
    assert twins[LOG.coarse_value] is (LOG.coarse_checked_value if on else None)
    assert twins[LOG.sum_value] is (LOG.sum_checked_value if on else None)
    assert twins.get(LOG.half_value) is None
    # The twin's range and its normal values' bound go with the twin, where the loops flag from the
    # raw patterns (RAW_FLAG).
    for value, twin in twins.items():
        raw = twin is not None and cpu_loops.RAW_FLAG
        assert ranges[value] == ((LOG.checked_range, LOG.normal_low) if raw else (None, None))
    # The bfloat16 outs' sets ask for the narrow twin and the coarse twin apart with the raw flag,
    # each built once whatever the host's picks (which _loop_set reads), where the twins are not
    # built for every output already.
    want = [
        (LOG.narrow_value, LOG.narrow_checked_value, True, LOG.checked_range, LOG.normal_low, True),
        (LOG.coarse_value, LOG.coarse_checked_value, True, LOG.checked_range, LOG.normal_low, True),
    ]
    assert raw_asked == ([] if on else want)
    built = "loops of " if on else "raw loops of "
    assert backend.kernels(LOG, True, checked_bf16=True) == built + LOG.narrow_value.__name__
    assert backend.kernels(LOG, True, coarse=True, checked_bf16=True) == built + LOG.coarse_value.__name__
    assert raw_asked == ([] if on else want), "built once, at the formula's first ask"


def test_tiles_apart_only_for_compute_bound_formulas_plumbing() -> None:
    """Which contiguous loops the backend builds apart (plumbing; the values are checked above):
    KL log_target's where cpu_loops.TILES_APART, the memory-bound formulas' never, so their
    loops' IR is what it was (tuner.restamp keeps their table entries)."""
    wide_inline = cpu_loops.CHECKED_SCALE and cpu_loops.HAS_SCALEF  # the Zen 5's float32 outs
    for formula, narrow in ((LOG, False), (LOG, True), (mse.FORMULA, False), (kl_div.FORMULA, True)):
        loops = cpu.BACKEND.kernels(formula, narrow)
        for fn in (loops.flat[0], loops.scalar_grad[1]):
            apart = "apart_contiguous" in fn.py_func.__qualname__
            expected = formula.compute_bound and cpu_loops.TILES_APART and (narrow or not wide_inline)
            assert apart is expected, (formula.name, narrow)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # Without the twin the loops are apart only where ldexp is three powers (no vscalefps: an
        # AVX2 host), for the exp's constants (cpu_loops._tiles_apart); with it, everywhere.
        ("0", f"False {not cpu_loops.HAS_SCALEF}"),
        ("1", "True True"),
        ("no", "LOSSTUNE_CPU_CHECKED: expected 0 or 1, got 'no'"),
    ],
)
def test_the_checked_switch_and_the_loops_apart_that_follow_it(value: str, expected: str) -> None:
    """LOSSTUNE_CPU_CHECKED says yes or no on any host (read at import, so in a fresh interpreter),
    and the loops apart follow it unless LOSSTUNE_CPU_APART says otherwise: the elementwise twin
    runs only in them (and, without it, where the host has no vscalefps). Anything else is refused
    by name."""
    code = "from kernels.backends import cpu_loops as L; print(L.CHECKED_SCALE, L.TILES_APART)"
    env = {k: v for k, v in os.environ.items() if k != "LOSSTUNE_CPU_APART"} | {"LOSSTUNE_CPU_CHECKED": value}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert expected in (run.stdout if run.returncode == 0 else run.stderr)
    assert (run.returncode == 0) is (value in ("0", "1"))


@pytest.mark.parametrize(
    ("switch", "attribute", "value", "expected"),
    [
        ("LOSSTUNE_CPU_APART", "TILES_APART", "0", "False"),
        ("LOSSTUNE_CPU_APART", "TILES_APART", "1", "True"),
        ("LOSSTUNE_CPU_APART", "TILES_APART", "yes", "LOSSTUNE_CPU_APART: expected 0 or 1, got 'yes'"),
        ("LOSSTUNE_CPU_RAW_FLAG", "RAW_FLAG", "0", "False"),
        ("LOSSTUNE_CPU_RAW_FLAG", "RAW_FLAG", "1", "True"),
        ("LOSSTUNE_CPU_RAW_FLAG", "RAW_FLAG", "on", "LOSSTUNE_CPU_RAW_FLAG: expected 0 or 1, got 'on'"),
    ],
)
def test_the_apart_and_raw_flag_switches(switch: str, attribute: str, value: str, expected: str) -> None:
    """LOSSTUNE_CPU_APART and LOSSTUNE_CPU_RAW_FLAG say yes or no on any host (read at import, so
    in a fresh interpreter); anything else is refused by name."""
    code = f"from kernels.backends import cpu_loops; print(cpu_loops.{attribute})"
    env = {**os.environ, switch: value}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    assert expected in (run.stdout if run.returncode == 0 else run.stderr)
    assert (run.returncode == 0) is (value in ("0", "1"))
