"""The CPU backend's table walk (``Variant.TABLE``): out = table[bits of target], the table the
formula's own scalar_grad loop stores for every 16-bit target.

A table changes how a value is found, never which: every table config gives the bits the
scalar_grad loop gives, for every 16-bit target pattern (NaN, inf, zeros and subnormals included),
both 16-bit formats, out and target formats mixed, ragged sizes, both core counts, streamed and
ordinary stores at aligned and misaligned outs. The variant is in the space only where it is
legal, and the gather is checked where it acts: in the machine code numba built.
"""

from __future__ import annotations

import pytest
import torch
from numba import njit

import kernels
from kernels import dispatch
from kernels.backends import cpu as cpu_backend_module
from kernels.backends import cpu_loops
from kernels.modes import Variant
from kernels.ops import kl_div, mse
from kernels.tiling import Tiling
from tests.helpers import as_bits, run_fresh

pytestmark = pytest.mark.usefixtures("cpu_backend")
needs_gather = pytest.mark.skipif(not cpu_loops.HAS_GATHER, reason="the table walk needs AVX2 or AVX-512 gathers")

ENTRIES = cpu_loops.TABLE_ENTRIES
SIXTEEN = (torch.float16, torch.bfloat16)


def every_pattern(dtype: torch.dtype, repeats: int, tail: int) -> torch.Tensor:
    """Every 16-bit pattern of ``dtype`` ``repeats`` times over, shuffled, plus ``tail`` more."""
    bits = torch.arange(ENTRIES, dtype=torch.int32).to(torch.int16).repeat(repeats)
    bits = torch.cat([bits[torch.randperm(bits.numel(), generator=torch.Generator().manual_seed(1))], bits[:tail]])
    return bits.view(dtype)


def log_kl(g: torch.Tensor, t: torch.Tensor, config: Tiling, out: torch.Tensor | None = None) -> torch.Tensor:
    x = torch.empty(t.shape, dtype=g.dtype if out is None else out.dtype)  # never read, only its dtype
    return kernels.kl_div_backward(g, x, t, "mean", True, out=out, backend="cpu", config=config)


@needs_gather
@pytest.mark.parametrize("dtype", SIXTEEN, ids=str)
def test_table_gives_the_scalar_grad_bits_for_every_target_pattern(dtype: torch.dtype) -> None:
    t = every_pattern(dtype, 64, 77)  # 2^22 + 77: a ragged last gather
    g = torch.tensor(-0.625).to(dtype)
    want = as_bits(log_kl(g, t, Tiling(4096, 1, Variant.SCALAR_GRAD)))
    for cores in range(1, min(2, cpu_loops.max_threads()) + 1):
        for tile, stream in ((4096, False), (4096, True), (65536, False)):
            got = log_kl(g, t, Tiling(tile, cores, Variant.TABLE, stream=stream))
            assert torch.equal(as_bits(got), want), f"cores={cores} tile={tile} stream={stream}"


@needs_gather
def test_table_streams_to_a_misaligned_out_and_touches_nothing_else() -> None:
    n = (1 << 22) + 5
    t = torch.rand(n).to(torch.bfloat16)
    g = torch.tensor(1.0).to(torch.bfloat16)
    want = as_bits(log_kl(g, t, Tiling(4096, 2, Variant.SCALAR_GRAD)))
    for lead in (0, 3):  # out at a line boundary, and three elements past one
        storage = torch.full((n + lead + 3,), 5.0).to(torch.bfloat16)
        out = storage[lead : lead + n]
        got = log_kl(g, t, Tiling(1024, 2, Variant.TABLE, stream=True), out=out)
        assert got.data_ptr() == out.data_ptr() and torch.equal(as_bits(out), want)
        assert torch.equal(storage[:lead], torch.full((lead,), 5.0).to(torch.bfloat16))
        assert torch.equal(storage[lead + n :], torch.full((3,), 5.0).to(torch.bfloat16))


@needs_gather
@pytest.mark.parametrize(
    ("out_dtype", "target_dtype"), [(torch.float16, torch.bfloat16), (torch.bfloat16, torch.float16)]
)
def test_table_indexes_by_the_target_format_and_stores_the_out_format(
    out_dtype: torch.dtype, target_dtype: torch.dtype
) -> None:
    t = every_pattern(target_dtype, 64, 0)
    g = torch.tensor(2.5).to(torch.float32)  # a gradient of a third dtype
    out = torch.empty(t.shape, dtype=out_dtype)
    want = as_bits(log_kl(g, t, Tiling(4096, 2, Variant.SCALAR_GRAD), out=out).clone())
    assert torch.equal(as_bits(log_kl(g, t, Tiling(4096, 2, Variant.TABLE), out=out)), want)


@needs_gather  # a table config is a point of the space only where the host gathers
def test_a_float32_target_under_a_table_config_runs_the_loop_the_table_is_built_by() -> None:
    t = torch.rand(1 << 22)  # a float32 target has no 2^16-entry table
    g = torch.tensor(0.5)
    out = torch.empty(t.shape, dtype=torch.float16)
    want = as_bits(log_kl(g, t, Tiling(4096, 2, Variant.SCALAR_GRAD), out=out).clone())
    assert torch.equal(as_bits(log_kl(g, t, Tiling(4096, 2, Variant.TABLE), out=out)), want)


def _space(op: str, dtype: torch.dtype, n: int, reduction: str = "mean") -> tuple[Variant, ...]:
    x, t = torch.empty(n, dtype=dtype), torch.empty(n, dtype=dtype)
    g = torch.empty((), dtype=dtype) if reduction == "mean" else torch.empty(n, dtype=dtype)
    if op == "mse":
        _, ex = mse.get_workspace_size(g, x, t, reduction, torch.empty_like(x), backend="cpu")
    else:
        _, ex = kl_div.get_workspace_size(g, x, t, reduction, op == "kl_div-log", torch.empty_like(x), backend="cpu")
    return dict(ex.space.knobs)["variant"]


def test_the_table_is_a_variant_only_of_kl_log_target_0d_16bit_large_problems_and_gathering_hosts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    big = cpu_backend_module.TABLE_MIN_NUMEL
    if cpu_loops.HAS_GATHER:
        for dtype in SIXTEEN:
            # Last, so the default stays the scalar_grad loop: the untuned baseline never gathers.
            assert _space("kl_div-log", dtype, big) == (Variant.SCALAR_GRAD, Variant.STRIDED, Variant.TABLE)
    for why, case in {
        "float32 out": ("kl_div-log", torch.float32, big, "mean"),
        "full gradient": ("kl_div-log", torch.float16, big, "none"),
        "below the size": ("kl_div-log", torch.float16, big // 2, "mean"),
        "memory-bound formula": ("kl_div", torch.float16, big, "mean"),
        "formula reads self": ("mse", torch.float16, big, "mean"),
    }.items():
        assert Variant.TABLE not in _space(*case), why
    monkeypatch.setattr(cpu_loops, "HAS_GATHER", False)  # a host without gathers (LOSSTUNE_CPU_GATHER=0)
    dispatch.clear_plans()  # the plan cache holds the space the last call was planned with
    assert Variant.TABLE not in _space("kl_div-log", torch.bfloat16, big)
    monkeypatch.undo()
    dispatch.clear_plans()  # no later test replays a plan made without gathers


@needs_gather
def test_the_table_walk_gathers_the_hosts_dword_lanes_at_a_time() -> None:
    """16 lanes (zmm) with AVX-512, 8 (ymm) with AVX2 only, in the machine code numba built."""
    t = torch.rand(1 << 22).to(torch.bfloat16)
    log_kl(torch.tensor(1.0).to(torch.bfloat16), t, Tiling(4096, 2, Variant.TABLE))
    # The launch's own signatures, built again by a dispatcher with no cache: the backend's may have
    # loaded its code from the compiled-loop cache (jit_cache), which shows no assembly.
    fresh = njit(parallel=True, nogil=True)(cpu_loops._table)
    for sig in cpu_loops.TABLE_WALK[1].signatures:
        fresh.compile(sig)
    asm = "\n".join(fresh.inspect_asm().values())
    register = {16: "zmm", 8: "ymm"}[cpu_loops.GATHER_LANES]
    gathers = [line for line in asm.splitlines() if "vpgatherdd" in line]
    assert gathers and all(register in line for line in gathers), gathers[:3]


def test_a_table_config_on_a_host_without_gathers_is_refused_before_writing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plumbing (HAS_GATHER mocked off, as on a host without AVX2): an explicit table config is outside the
    space there, refused by name, and out is left as it was."""
    monkeypatch.setattr(cpu_loops, "HAS_GATHER", False)
    dispatch.clear_plans()
    t = torch.rand(1 << 22).to(torch.bfloat16)
    out = torch.full(t.shape, 7.0, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="config") as caught:
        log_kl(torch.tensor(0.5).to(torch.bfloat16), t, Tiling(4096, 2, Variant.TABLE), out=out)
    assert "table" in str(caught.value) and bool((out == 7.0).all())
    monkeypatch.undo()
    dispatch.clear_plans()


def test_the_gather_lanes_follow_the_host_tier_and_the_switch_turns_them_off_in_a_fresh_process() -> None:
    want = {"avx512": 16, "avx2": 8}.get(cpu_backend_module.host_isa(), 0)
    assert cpu_loops.GATHER_LANES == want and cpu_loops.HAS_GATHER == (want > 0)
    code = (
        "import torch\n"
        "from kernels.backends import cpu_loops\n"
        "from kernels.ops import kl_div\n"
        "t = torch.empty(1 << 22, dtype=torch.bfloat16)\n"
        "_, ex = kl_div.get_workspace_size(torch.ones((), dtype=torch.bfloat16), t, t, 'mean', True, None,"
        " backend='cpu', allocate=True)\n"
        "print(cpu_loops.GATHER_LANES, [v.value for v in dict(ex.space.knobs)['variant']])\n"
    )
    assert run_fresh(code, {"LOSSTUNE_CPU_GATHER": "0"}) == "0 ['scalar_grad', 'strided']"
