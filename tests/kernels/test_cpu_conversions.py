"""The CPU backend's 16-bit conversions against torch's, bit for bit: every float16 and bfloat16
bit pattern widened, and float32 values narrowed (random bits, ties, subnormal and overflow edges).

float16 has two implementations: the branch-free software one (hosts without F16C) and LLVM's
half conversions, which become vcvtph2ps/vcvtps2ph with F16C; both are held to the same bar. So
has bfloat16's narrowing: integer rounding, or vcvtneps2bf16 with AVX512-BF16 plus a fix-up for
subnormal inputs, which that instruction flushes to zero."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from numba import njit

from kernels.backends import cpu_loops
from tests.helpers import run_fresh


def _elementwise(convert: Callable[..., object]) -> Callable[..., None]:
    """A compiled loop applying one of cpu_loops' conversions to every element, as the kernels do."""

    @njit
    def loop(src, out):
        for i in range(src.size):
            out[i] = convert(src[i])

    return loop


_widen_f16 = _elementwise(cpu_loops._f16_to_f32)
_widen_f16_hw = _elementwise(cpu_loops._f16_to_f32_hw)
_widen_bf16 = _elementwise(cpu_loops._bf16_to_f32)
_narrow_f16 = _elementwise(cpu_loops._f32_to_f16)
_narrow_f16_hw = _elementwise(cpu_loops._f32_to_f16_hw)
_narrow_bf16 = _elementwise(cpu_loops._f32_to_bf16)
_narrow_bf16_hw = _elementwise(cpu_loops._f32_to_bf16_hw)


F16C = pytest.mark.skipif(not cpu_loops.HAS_F16C, reason="host has no F16C (or LOSSTUNE_CPU_F16C=0)")
BF16 = pytest.mark.skipif(not cpu_loops.HAS_BF16, reason="host has no AVX512-BF16 (or LOSSTUNE_CPU_BF16=0)")
IMPLS = [
    pytest.param(torch.float16, "software", id="float16-software"),
    pytest.param(torch.float16, "f16c", id="float16-f16c", marks=F16C),
    pytest.param(torch.bfloat16, "software", id="bfloat16-software"),
    pytest.param(torch.bfloat16, "avx512bf16", id="bfloat16-avx512bf16", marks=BF16),
]


def _same_bits(got: np.ndarray, want: np.ndarray, src: np.ndarray) -> None:
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, f"{bad.size} differ, e.g. {src[bad[:3]]!r}: got {got[bad[:3]]!r} want {want[bad[:3]]!r}"


@pytest.mark.parametrize(("dtype", "impl"), IMPLS)
def test_every_16_bit_pattern_widens_like_torch(dtype: torch.dtype, impl: str) -> None:
    bits = np.arange(1 << 16, dtype=np.uint16)
    out = np.empty(bits.size, np.float32)
    if dtype is torch.float16:
        (_widen_f16_hw if impl == "f16c" else _widen_f16)(bits.view(np.int16), out)
    else:
        _widen_bf16(bits, out)
    want = torch.from_numpy(bits.view(np.int16)).view(dtype).float().numpy()
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(out), nan)
    _same_bits(out[~nan].view(np.uint32), want[~nan].view(np.uint32), bits[~nan])


def _hard_floats() -> np.ndarray:
    rng = np.random.default_rng(0)
    random_bits = rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    f16 = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    f16 = f16[np.isfinite(f16)]
    bf16 = (np.arange(1 << 16, dtype=np.uint32) << 16).view(np.float32)
    bf16 = bf16[np.isfinite(bf16)]
    bf16.sort()
    halfway = np.concatenate(
        [(grid[:-1].astype(np.float64) + grid[1:]) / 2 for grid in (f16, bf16)]
    )  # exact ties of either format and their neighbours, subnormal ones included
    ties = np.concatenate([halfway, np.nextafter(halfway, np.inf), np.nextafter(halfway, -np.inf)])
    edges = np.array(
        [
            65504,
            65519.99,
            65520,
            65536,
            6.1e-5,
            5.96e-8,
            2.98e-8,
            2.9802326e-08,
            1e-45,
            3.4e38,
            np.inf,
            -np.inf,
            np.nan,
            -0.0,
            0.0,
        ],
        dtype=np.float32,
    )
    return np.concatenate([random_bits, ties.astype(np.float32), edges, -edges])


@pytest.mark.parametrize(("dtype", "impl"), IMPLS)
def test_float32_narrows_like_torch_round_to_nearest_even(dtype: torch.dtype, impl: str) -> None:
    x = _hard_floats()
    if dtype is torch.float16:
        out = np.empty(x.size, np.int16)
        (_narrow_f16_hw if impl == "f16c" else _narrow_f16)(x, out)
    else:
        out = np.empty(x.size, np.uint16)
        (_narrow_bf16_hw if impl == "avx512bf16" else _narrow_bf16)(x, out)
    want = torch.from_numpy(x).to(dtype).view(torch.int16).numpy().view(out.dtype)
    nan = np.isnan(x)
    widened = torch.from_numpy(out.view(np.int16)).view(dtype).float().numpy()
    assert np.isnan(widened[nan]).all(), "NaN must stay NaN"
    _same_bits(out[~nan], want[~nan], x[~nan])


@BF16
def test_bfloat16_narrowings_agree_bit_for_bit_on_every_subnormal_and_nan() -> None:
    """vcvtneps2bf16 flushes subnormal inputs; the fix-up must give the integer path's bits for
    every one of them (2^24 patterns, both signs), and the same quiet NaN for every NaN class."""
    subnormal = np.arange(1 << 23, dtype=np.uint32)
    nan = np.array([0x7F800001, 0x7FBFFFFF, 0x7FC00000, 0x7FFFFFFF, 0x7F80FFFF, 0x7FFF0000], np.uint32)
    bits = np.concatenate([subnormal, nan])
    x = np.concatenate([bits, bits | np.uint32(0x80000000)]).view(np.float32)
    hw, sw = np.empty(x.size, np.uint16), np.empty(x.size, np.uint16)
    _narrow_bf16_hw(x, hw)
    _narrow_bf16(x, sw)
    _same_bits(hw, sw, x.view(np.uint32))


def test_bfloat16_ops_take_the_integer_rounding_when_bf16_is_off() -> None:
    """LOSSTUNE_CPU_BF16=0 (or a host without AVX512-BF16) compiles _f32_to_bf16 into the loops;
    the ops must meet the same bar through it, end to end, in a fresh process."""
    code = (
        "import torch, kernels\n"
        "from kernels.backends import cpu_loops\n"
        "from kernels.accuracy import mismatch\n"
        "from kernels.ops import kl_div, mse\n"
        "assert not cpu_loops.HAS_BF16\n"
        "g, x, t = (torch.randn(4099, generator=torch.Generator().manual_seed(i)).bfloat16() for i in range(3))\n"
        "problems = [mismatch(kernels.mse_loss_backward(g, x, t, 'none'), mse.reference(g, x, t, 'none')),\n"
        "            mismatch(kernels.kl_div_backward(g, x, t, 'sum', True), kl_div.reference(g, x, t, 'sum', True))]\n"
        "print(problems)\n"
    )
    assert run_fresh(code, {"LOSSTUNE_CPU_BF16": "0"}) == "[None, None]"


def test_float16_ops_take_the_software_path_when_f16c_is_off() -> None:
    """LOSSTUNE_CPU_F16C=0 (or a host without F16C) compiles the software conversions into the
    loops; the ops must meet the same bar through them, end to end, in a fresh process."""
    code = (
        "import torch, kernels\n"
        "from kernels.backends import cpu_loops\n"
        "from kernels.accuracy import mismatch\n"
        "from kernels.ops import kl_div, mse\n"
        "assert not cpu_loops.HAS_F16C\n"
        "g, x, t = (torch.randn(4099, generator=torch.Generator().manual_seed(i)).half() for i in range(3))\n"
        "problems = [mismatch(kernels.mse_loss_backward(g, x, t, 'none'), mse.reference(g, x, t, 'none')),\n"
        "            mismatch(kernels.kl_div_backward(g, x, t, 'sum', True), kl_div.reference(g, x, t, 'sum', True))]\n"
        "print(problems)\n"
    )
    assert run_fresh(code, {"LOSSTUNE_CPU_F16C": "0"}) == "[None, None]"
