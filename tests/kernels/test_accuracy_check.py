"""kernels.accuracy's check itself: the bar it applies, and that working in chunks (accuracy.CHUNK)
judges a tensor as one piece would. The tensors here span several chunks, and the element each
test plants sits past the first."""

from __future__ import annotations

import pytest
import torch

from kernels import accuracy

N = 3 * accuracy.CHUNK + 7  # three whole chunks and a short one


def _frexp_ulp(ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The spacing as the bar defined it before the bit arithmetic: frexp, clamp, pow."""
    _, exp = torch.frexp(ref.abs())
    lead = torch.clamp(exp.double() - 1, min=accuracy.MIN_EXP[dtype])
    return torch.pow(2.0, lead - accuracy.MANTISSA[dtype])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_ulp_from_the_bits_equals_frexp_and_pow(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(0)
    spread = torch.randn(20000, generator=gen, dtype=torch.float64)
    spread = spread * torch.exp2(torch.randint(-1080, 1000, (20000,), generator=gen).double())
    edges = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.4e-45, 6e-8, 0.5, 1.0, 3.0, 65504.0, 3.4e38, 1.7e308]
    values = torch.cat([torch.tensor(edges, dtype=torch.float64), spread])
    values = values[torch.isfinite(values)]
    assert torch.equal(accuracy.ulp(values, dtype), _frexp_ulp(values, dtype))
    assert accuracy.ulp(torch.tensor([1.0], dtype=torch.float64), dtype).item() == 2.0 ** -accuracy.MANTISSA[dtype]


def _pair(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    ref = torch.randn(N, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 3.0
    return ref.to(dtype), ref


def test_exact_rounding_passes_and_an_element_off_in_the_last_chunk_fails() -> None:
    out, ref = _pair(torch.bfloat16)
    assert accuracy.mismatch(out, ref) is None
    out[N - 3] = out[N - 3] * 1.5
    msg = accuracy.mismatch(out, ref)
    assert msg is not None and msg.startswith(f"1 of {N} elements off")
    assert f"got {out[N - 3].double().item()!r}" in msg


def test_counts_every_chunk_and_names_the_worst_element() -> None:
    out, ref = _pair()
    out[5] += 1e-3  # first chunk
    out[accuracy.CHUNK + 9] += 1e-1  # second chunk: the worst
    out[3 * accuracy.CHUNK + 2] += 1e-2  # the short last one
    msg = accuracy.mismatch(out, ref)
    assert msg is not None and msg.startswith(f"3 of {N} elements off")
    assert f"got {out[accuracy.CHUNK + 9].double().item()!r}" in msg


def test_a_nan_mismatch_outranks_an_earlier_bad_value_and_names_its_place() -> None:
    out, ref = _pair()
    out = out.reshape(-1, 1)
    ref = ref.reshape(-1, 1)
    out[2, 0] += 1.0  # off, in the first chunk
    out[2 * accuracy.CHUNK + 1, 0] = float("nan")
    assert accuracy.mismatch(out, ref) == f"NaN mismatch at {[[2 * accuracy.CHUNK + 1, 0]]}"
    ref[N - 1, 0] = float("nan")  # a NaN the out lacks, in the last chunk: the second place
    assert accuracy.mismatch(out, ref) == f"NaN mismatch at {[[2 * accuracy.CHUNK + 1, 0], [N - 1, 0]]}"


def test_an_infinity_the_reference_does_not_round_to_fails() -> None:
    out, ref = _pair(torch.float16)
    ref[accuracy.CHUNK + 4] = 1e6  # rounds to float16's infinity
    out[accuracy.CHUNK + 4] = float("inf")
    assert accuracy.mismatch(out, ref) is None  # the same infinity
    out[accuracy.CHUNK + 4] = 65504.0
    assert accuracy.mismatch(out, ref) == "infinities differ"


def test_relative_bar_of_a_broadcast_scale_applies_in_every_chunk() -> None:
    out, ref = _pair()
    out[2 * accuracy.CHUNK + 5] += 2e-4
    # A 0-d scale, broadcast over every chunk: 1e-5 of 100 carries the 2e-4, of 10 does not.
    assert accuracy.mismatch(out, ref, 0.0, rel_to=torch.tensor(100.0, dtype=torch.float64), rel=1e-5) is None
    msg = accuracy.mismatch(out, ref, 0.0, rel_to=torch.tensor(10.0, dtype=torch.float64), rel=1e-5)
    assert msg is not None and msg.startswith(f"1 of {N} elements off") and "> tol 0.0001" in msg


def test_zero_d_and_empty() -> None:
    ref = torch.tensor(2.0, dtype=torch.float64)
    assert accuracy.mismatch(torch.tensor(2.0), ref) is None
    assert accuracy.mismatch(torch.tensor(float("nan")), ref) == "NaN mismatch at [[]]"
    assert accuracy.mismatch(torch.empty(0, 5), torch.empty(0, 5, dtype=torch.float64)) is None


def test_a_chunk_equal_to_the_rounded_reference_counts_its_finite_elements_alone() -> None:
    """A chunk equal to the reference rounded passes whole (mismatch's shortcut); its infinities
    are left out of the count of finite elements, as the float64 path leaves them out."""
    out, ref = _pair(torch.float16)
    ref[7] = 1e6  # rounds to float16's infinity, in a chunk that is otherwise exact
    out[7] = float("inf")
    out[2 * accuracy.CHUNK] = out[2 * accuracy.CHUNK] * 2
    msg = accuracy.mismatch(out, ref)
    assert msg is not None and msg.startswith(f"1 of {N - 1} elements off")


def test_a_bar_under_one_ulp_takes_no_shortcut() -> None:
    """The shortcut holds for bars of 1 ulp or more: a 16-bit reference reaches its dtype through
    float32, two roundings, a hair over half a spacing; and with no ulps at all (float32's summed
    bar) even the correctly rounded value is off."""
    assert accuracy.mismatch(torch.tensor([0.1]), torch.tensor([0.1], dtype=torch.float64), 0.0) is not None
    twice = torch.tensor([1 + 2**-8 + 2**-30], dtype=torch.float64)
    assert accuracy.mismatch(twice.to(torch.bfloat16), twice, 0.5) is not None
    assert accuracy.mismatch(twice.to(torch.bfloat16), twice, 1.0) is None
    tiny = torch.tensor([1e-41], dtype=torch.float64)
    assert accuracy.mismatch(tiny.float(), tiny, 0.0, rel_to=tiny.abs(), rel=1e-5) is not None


def test_a_nan_bar_in_a_later_chunk_is_the_worst_element_as_in_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    out = torch.zeros(N)
    out[0] = 1.0
    ref = torch.zeros(N, dtype=torch.float64)
    scale = torch.ones(N, dtype=torch.float64)
    scale[accuracy.CHUNK + 5] = float("nan")
    chunked = accuracy.mismatch(out, ref, 0.0, rel_to=scale, rel=1e-5)
    assert chunked == f"1 of {N} elements off: e.g. got 0.0, ref 0.0, err 0 > tol nan"
    monkeypatch.setattr(accuracy, "CHUNK", 1 << 30)  # one piece
    assert accuracy.mismatch(out, ref, 0.0, rel_to=scale, rel=1e-5) == chunked


def test_chunks_of_four_read_as_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seeded random tensors (NaN, infinities, values off, subnormal and huge magnitudes, relative
    scales with NaN and infinities, every ulps): the message from chunks of 4 is the one-piece one."""
    gen = torch.Generator().manual_seed(7)

    def draw(high: int) -> int:
        return int(torch.randint(0, high, (1,), generator=gen))

    for _ in range(600):
        dtype = (torch.float32, torch.float16, torch.bfloat16)[draw(3)]
        n = (0, 1, 3, 4, 5, 9, 17)[draw(7)]
        ref = torch.randn(n, generator=gen, dtype=torch.float64) * 10.0 ** (draw(46) - 40)
        out = ref.to(dtype)
        for _ in range(draw(4) if n else 0):
            j, kind = draw(n), draw(6)
            if kind == 0:
                out[j] = out[j] * (1 + (1e-3, 1e-2, 1e-7)[draw(3)])
            elif kind in (1, 2):
                (out if kind == 1 else ref)[j] = float("nan")
            elif kind in (3, 4):
                (out if kind == 3 else ref)[j] = float("inf")
        ulps = (None, 0.0, 0.5, 1.0, 4.0)[draw(5)]
        extra: dict[str, object] = {}
        if n and draw(3) == 0:
            scale = torch.rand(n, generator=gen, dtype=torch.float64) * 10.0 ** (draw(5) - 3)
            if draw(3) == 0:
                scale[draw(n)] = (float("nan"), float("inf"))[draw(2)]
            extra = {"rel_to": scale, "rel": (0.0, 1e-5, 1e-2)[draw(3)]}
        monkeypatch.setattr(accuracy, "CHUNK", 4)
        chunked = accuracy.mismatch(out, ref, ulps, **extra)
        monkeypatch.setattr(accuracy, "CHUNK", 1 << 30)
        assert accuracy.mismatch(out, ref, ulps, **extra) == chunked, (dtype, n, ulps, extra)
