"""The CPU backend's pick of KL log_target's checked twin for bfloat16 outputs of the contiguous
loops and of the walks with a 0-d gradient (backends.cpu.checked_bf16_offered: the Xeon, LLVM's
rocketlake, and the Zen 4), where vscalefps is one instruction and the other outputs keep the formula's own loops;
with the coarse pick too (backends.cpu.coarse_offered: the Xeon takes both), the coarse formula's
twin. These take the picks on any host, and leave them off, by the backend's attributes: every bit
the same with the twin and without (the loops themselves are held to the formula's bits in
test_checked_scale), the pick reaching the loops it names and no others (float16 outputs, the walks
with a full gradient, the table walk, the sums keep theirs), and the host's default following the
CPU numba compiles for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest
import torch

import kernels
from kernels import aclnn, dispatch
from kernels.backends import cpu, cpu_loops
from kernels.ops import kl_div
from tests.helpers import run_fresh

LOG = kl_div.FORMULA_LOG


# Whether the backend takes the coarse formula for bfloat16 outs beside the pick (CpuBackend.coarse):
# both ways, on any host.
COARSE = pytest.mark.parametrize("coarse", [False, True], ids=["narrow", "coarse"])


@pytest.fixture
def checked_bf16(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Sets the CPU backend's pick (CpuBackend.checked_bf16), its 0-d walks' (CpuBackend.checked_walks:
    ``walks``, else the pick's) and its coarse one (CpuBackend.coarse), with no plan cached from
    before (each plan holds the loops it was made with)."""

    def take(on: bool, coarse: bool, walks: bool | None = None) -> None:
        monkeypatch.setattr(cpu.BACKEND, "checked_bf16", on)
        monkeypatch.setattr(cpu.BACKEND, "checked_walks", on if walks is None else walks)
        monkeypatch.setattr(cpu.BACKEND, "coarse", coarse)
        dispatch.clear_plans()

    yield take
    dispatch.clear_plans()


def _every_bfloat16() -> torch.Tensor:
    """All 65536 bfloat16 bit patterns (NaN, inf and subnormals among them), twice over and a short
    tail, so that a tile-1024 loop has two blocks' shares that end mid-tile."""
    every = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    return torch.cat([every, every.flip(0), every[:777]])


def _grads(n: int) -> list[torch.Tensor]:
    """0-d gradients from the subnormal to the top binade (a 0-d gradient's normal_low is not
    negative at every size: 2^-110 makes some outputs subnormal, 2^-130 is one), zero, and a full
    gradient over many binades with 0, inf and NaN in it."""
    scalars = [torch.tensor(v, dtype=torch.bfloat16) for v in (1.0, -2.5, 2.0**100, -(2.0**-110), 2.0**-130, 0.0)]
    gen = torch.Generator().manual_seed(5)
    full = torch.exp2(torch.randint(-120, 120, (n,), generator=gen).double()) * torch.randn(n, generator=gen).double()
    full[:4] = torch.tensor([0.0, math.inf, math.nan, -0.0], dtype=torch.float64)
    return [*scalars, full.to(torch.bfloat16)]


def _bits(v: torch.Tensor) -> torch.Tensor:
    return v.view(torch.int16)


@COARSE
@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize(
    "config",
    [
        {"tile": 1024, "cores": 1},
        {"tile": 1024, "cores": 2, "stream": True},
        {"tile": 4096, "cores": 2, "prefetch": 1},
    ],
    ids=["serial", "parallel-streamed", "parallel-prefetched"],
)
def test_every_bfloat16_target_gives_the_same_bits_with_the_pick_on_and_off(
    checked_bf16: Callable[..., None], coarse: bool, reduction: str, config: dict[str, object]
) -> None:
    """Every bfloat16 target against each gradient, the flat loop (full gradients) and the
    scalar_grad loop (0-d ones), through the library: with the pick on, the loops apart through
    the twin (one power of two; the raw flag of the target's patterns a tile; normal_run's store
    for a 0-d gradient); off, the narrow (or coarse) formula inline. Every bit the same."""
    t = _every_bfloat16()
    for g in _grads(t.numel()):
        variant = "scalar_grad" if g.dim() == 0 else "flat"
        cfg = {"variant": variant, **config}
        outs = []
        for on in (False, True):
            checked_bf16(on, coarse)
            outs.append(kernels.kl_div_backward(g, t, t, reduction, True, backend="cpu", config=cfg))
        off, on_ = outs
        assert torch.equal(_bits(off), _bits(on_)), f"g {tuple(g.shape)}: {(_bits(off) != _bits(on_)).sum()} differ"
    # (That the pick reaches these loops, and that on a host where every output takes the twin
    # already the two are one set, the plumbing test below checks.)


@COARSE
@pytest.mark.parametrize("layout", ["broadcast", "transposed", "transposed-deferred"])
def test_every_bfloat16_target_through_the_walks_with_a_0d_gradient_gives_the_same_bits_with_the_pick_on_and_off(
    checked_bf16: Callable[..., None], coarse: bool, layout: str
) -> None:
    """Every bfloat16 target in a broadcast row (8 rows of 65536, a stride-0 target: the strided
    walk's runs of 65536 go apart) and in a transposed target (64 columns of 2048 a row, every
    pattern twice: the transposed walk's tiles, each one run, go apart; its deferred order keeps the
    formula inline) against each 0-d gradient, 1 and 2 cores: every bit the same with the walks'
    pick on and off (the contiguous loops' pick on in both)."""
    every = _every_bfloat16()
    if layout == "broadcast":
        t = every[: 2**16].expand(8, 2**16)
        x = torch.zeros(t.shape, dtype=torch.bfloat16)
    else:
        t = x = every[: 2**17].view(64, 2**11).t()
    knobs: dict[str, object] = {"variant": "strided", "tile": 4096}
    if layout == "transposed-deferred":
        if not cpu_loops.DEFERRED:
            pytest.skip("this host's transposed walk has no deferred order (cpu_loops.DEFERRED)")
        knobs["defer_out"] = True
    for g in _grads(t.numel())[:-1]:  # the 0-d ones
        for cores in (1, 2):
            outs = []
            for walks in (False, True):
                checked_bf16(True, coarse, walks)
                cfg = {**knobs, "cores": cores}
                outs.append(kernels.kl_div_backward(g, x, t, "mean", True, backend="cpu", config=cfg))
            off, on_ = (_bits(o) for o in outs)
            assert torch.equal(off, on_), f"g {float(g)}, {cores} cores: {(off != on_).sum()} differ"


@pytest.mark.parametrize(
    ("target_dtype", "grad_dtype"),
    [(torch.float32, torch.bfloat16), (torch.float16, torch.bfloat16), (torch.bfloat16, torch.float32)],
    ids=["float32-target", "float16-target", "float32-grad"],
)
def test_mixed_dtypes_with_a_bfloat16_out_give_the_same_bits_with_the_pick_on_and_off(
    checked_bf16: Callable[..., None], target_dtype: torch.dtype, grad_dtype: torch.dtype
) -> None:
    """A bfloat16 out (input's dtype) of a float32 or float16 target (whose raw flag reads its own
    patterns, or none: a float32 target keeps the per-element flag) or of a float32 gradient:
    every bfloat16 target value, in the target's dtype, through both contiguous loops, 1 and 2
    cores: every bit the same with the pick on and off (the narrow formula: the dtypes' plumbing is
    the coarse one's too)."""
    t = _every_bfloat16().to(target_dtype)
    x = torch.zeros(t.shape, dtype=torch.bfloat16)
    for g in [v.to(grad_dtype) for v in _grads(t.numel())]:
        for cores in (1, 2):
            cfg = {"variant": "scalar_grad" if g.dim() == 0 else "flat", "tile": 1024, "cores": cores}
            outs = []
            for on in (False, True):
                checked_bf16(on, False)
                outs.append(kernels.kl_div_backward(g, x, t, "mean", True, backend="cpu", config=cfg))
            assert outs[0].dtype is torch.bfloat16
            assert torch.equal(_bits(outs[0]), _bits(outs[1])), f"g {tuple(g.shape)} {g.dtype}, {cores} cores"


def _picked(
    g: torch.Tensor, t: torch.Tensor, config: dict[str, object] | str | None, x: torch.Tensor | None = None
) -> cpu_loops.CpuKernels:
    """The loops the backend picks for ``g``, ``t`` (and ``x``, else t) and a contiguous out (a
    transposed t: the transposed walk), or for a broadcast sum of t's rows (``config`` "summed")."""
    if x is None:
        x = torch.zeros(1, t.shape[-1], dtype=t.dtype) if config == "summed" else t
    cfg = None if config == "summed" else config
    out = torch.empty(x.shape, dtype=x.dtype)
    ex = aclnn.kl_div_backward_get_workspace_size(g, x, t, 1, True, out, backend="cpu", config=cfg)[1]
    return cpu.BACKEND._loop_set(ex)[0]


@COARSE
def test_the_pick_reaches_bfloat16_outs_of_the_contiguous_loops_alone_plumbing(
    checked_bf16: Callable[..., None], coarse: bool
) -> None:
    """Which loops the backend hands out with the pick on (plumbing; the tests above check the
    bits): the twin's (the coarse one's with the coarse pick) for a bfloat16 out of the flat and
    scalar_grad loops and of the walks with a 0-d gradient (with checked_walks; without it, their
    own); the formula's own for a float16 out, for the walks with a full gradient and the table
    variant (whose entries were tuned on them: with the coarse pick, the coarse ones), and the
    narrow ones for a broadcast sum of a one-value gradient (whose terms take the narrow formula
    whatever the pick); KL without log_target has no twin, so no set of its own."""
    checked_bf16(True, coarse)
    backend = cpu.BACKEND
    twin = backend.kernels(LOG, True, coarse=coarse, checked_bf16=True)
    own, narrow = backend.kernels(LOG, True, coarse=coarse), backend.kernels(LOG, True)
    assert (twin is own) is cpu_loops.CHECKED_SCALE
    # The coarse pick's twin is its own set, never the narrow formula's.
    assert (twin is backend.kernels(LOG, True, checked_bf16=True)) is not coarse
    bf, half = torch.zeros(4096, dtype=torch.bfloat16), torch.zeros(4096, dtype=torch.float16)
    g0 = torch.tensor(0.5, dtype=torch.bfloat16)
    assert _picked(g0, bf, {"variant": "scalar_grad", "tile": 1024, "cores": 1}) is twin
    assert _picked(torch.ones_like(bf), bf, {"variant": "flat", "tile": 1024, "cores": 2}) is twin
    halves = backend.kernels(LOG, True, half=True)  # a float16 out of a float16 gradient's
    assert _picked(g0.half(), half, {"variant": "scalar_grad", "tile": 1024, "cores": 1}) is halves
    assert halves is not twin or cpu_loops.CHECKED_SCALE
    transposed = torch.zeros(64, 64, dtype=torch.bfloat16).t()
    assert _picked(g0, transposed, None) is twin
    assert _picked(torch.ones(64, 64, dtype=torch.bfloat16), transposed, None) is own
    broadcast = torch.zeros(64, dtype=torch.bfloat16).expand(8, 64)
    walk = {"variant": "strided", "tile": 1024, "cores": 1}
    assert _picked(g0, broadcast, walk, x=torch.zeros(8, 64, dtype=torch.bfloat16)) is twin
    assert (
        _picked(torch.ones(8, 64, dtype=torch.bfloat16), broadcast, walk, x=torch.zeros(8, 64, dtype=torch.bfloat16))
        is own
    )
    checked_bf16(True, coarse, False)  # the walks' pick off: their own, the contiguous loops' kept
    assert _picked(g0, transposed, None) is own
    assert _picked(g0, broadcast, walk, x=torch.zeros(8, 64, dtype=torch.bfloat16)) is own
    assert _picked(g0, bf, {"variant": "scalar_grad", "tile": 1024, "cores": 1}) is twin
    checked_bf16(True, coarse)
    if cpu_loops.HAS_GATHER:  # the table variant's walk, where the host has it
        table = {"variant": "table", "tile": 1024, "cores": 1}
        assert _picked(g0, torch.zeros(cpu.TABLE_MIN_NUMEL, dtype=torch.bfloat16), table) is own
        # ... but a float32 target has no table: its config runs the scalar_grad loop, the twin's.
        wide_t = torch.zeros(cpu.TABLE_MIN_NUMEL)
        assert _picked(g0, wide_t, table, x=torch.zeros(cpu.TABLE_MIN_NUMEL, dtype=torch.bfloat16)) is twin
    assert _picked(g0, torch.zeros(64, 64, dtype=torch.bfloat16), "summed") is narrow  # a one-value sum's terms
    plain = backend.kernels(kl_div.FORMULA, True)
    assert backend.kernels(kl_div.FORMULA, True, checked_bf16=True) is plain
    assert backend.kernels(kl_div.FORMULA, True, coarse=True, checked_bf16=True) is plain


def test_loops_of_an_older_revision_without_raw_flag_keep_the_narrow_set_plumbing() -> None:
    """tuner.restamp builds an older revision's loops through this backend: one whose
    make_cpu_kernels takes no raw_flag has no twin set to give, so the pick gives its narrow loops (its
    coarse ones with the coarse pick)
    (plumbing: a stand-in module whose builds are named, not compiled)."""

    class Older:  # the loops module before raw_flag, its builds recorded by name
        def __getattr__(self, name: str) -> object:
            return getattr(cpu_loops, name)

        @staticmethod
        def make_cpu_kernels(value, compute_bound, checked_py=None, apart=None, checked_range=None, normal_low=None):
            return ("loops of", value.__name__, checked_py is not None)

    backend = cpu.CpuBackend(Older())  # type: ignore[arg-type]
    backend.checked_bf16 = True
    assert backend.kernels(LOG, True, checked_bf16=True) is backend.kernels(LOG, True)
    assert backend.kernels(LOG, True, coarse=True, checked_bf16=True) is backend.kernels(LOG, True, coarse=True)


_PICK = "from kernels.backends import cpu; print(cpu.BACKEND.checked_bf16, cpu.BACKEND.checked_walks)"
_UNSET = ("LOSSTUNE_CPU_CHECKED_BF16", "NUMBA_CPU_FEATURES")


@pytest.mark.parametrize(
    ("cpu_name", "switch", "expected"),
    [
        ("rocketlake", None, "True"),
        ("sapphirerapids", None, "False"),
        ("znver4", None, "True"),
        ("znver5", None, "False"),
        ("sapphirerapids", "1", "True"),
        ("znver4", "0", "False"),
        ("rocketlake", "0", "False"),
    ],
)
def test_the_pick_follows_the_cpu_compiled_for_and_its_switch(cpu_name: str, switch: str | None, expected: str) -> None:
    """Unset, the backend takes the twin for bfloat16 outs on the CPUs of cpu._CHECKED_BF16_CPUS
    (the Xeon, LLVM's rocketlake, and the Zen 4) and nowhere else, read from numba's CPU (NUMBA_CPU_NAME), as
    every feature gate reads it; LOSSTUNE_CPU_CHECKED_BF16 says yes or no on any host. The 0-d
    walks' pick (CpuBackend.checked_walks) follows it."""
    env = {"NUMBA_CPU_NAME": cpu_name} | ({} if switch is None else {"LOSSTUNE_CPU_CHECKED_BF16": switch})
    assert run_fresh(_PICK, env, _UNSET) == f"{expected} {expected}"


def test_the_switch_refuses_anything_but_0_or_1_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pick reads its switch each time it is asked (a backend reads it once, when made)."""
    monkeypatch.setenv("LOSSTUNE_CPU_CHECKED_BF16", "on")
    with pytest.raises(ValueError, match="LOSSTUNE_CPU_CHECKED_BF16: expected 0 or 1, got 'on'"):
        cpu.checked_bf16_offered()
