"""Every config of a space gives bitwise the default's output; spaces are data, buildable without devices."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import kernels
from kernels import backends, tiling
from kernels.modes import Variant
from kernels.tiling import DeviceFacts, Tiling, cpu_space, cuda_space, npu_space
from tests.helpers import run_fresh

DTYPES = (torch.float32, torch.float16, torch.bfloat16)

# (grad, input, target) shapes that reach each variant: flat, scalar_grad, strided, and KL's reduce
# (summed across outputs, and along the summed dims: cpu_loops.reduce_along).
PROBLEMS = {
    "flat": ((3, 1000), (3, 1000), (3, 1000)),
    "scalar_grad": ((), (3, 1000), (3, 1000)),
    "strided": ((3, 1000), (3, 1000), (1000,)),
    "reduce": ((3, 50, 20), (50, 1), (3, 50, 20)),
    "reduce_along": ((3, 3000), (3, 1), (3, 3000)),
    "transposed": ((64, 320), (320, 64), (320, 64)),  # input and target go in transposed (Layout.TRANSPOSED)
}
# The interpreter runs the Triton reduce walk's loop in Python, about 45 s a config over 3000 terms
# (each such test took 386-408 s, a third of CI's time). reduce_along's long sum is there for the
# CPU's walk along the summed dims (cpu_loops.reduce_along), which the Triton source has no twin
# of; 403 terms (the four-ahead loop and its remainder) hold the Triton walk's order as well.
INTERPRETED = {"reduce_along": ((3, 403), (3, 1), (3, 403))}
OPS = {
    "mse": lambda g, x, t, **kw: kernels.mse_loss_backward(g, x, t, "mean", **kw),
    "l1": lambda g, x, t, **kw: kernels.l1_loss_backward(g, x, t, "sum", **kw),
    "kl_div": lambda g, x, t, **kw: kernels.kl_div_backward(g, x, t, "batchmean", True, **kw),
}


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_sampled_configs_are_bitwise_equal_to_default(
    backend: str, device: str, op: str, dtype: torch.dtype, problem: str
) -> None:
    if problem.startswith("reduce") and op != "kl_div":
        pytest.skip("only KL sums back to its input's shape")
    gen = torch.Generator().manual_seed(3)
    shapes = INTERPRETED.get(problem, PROBLEMS[problem]) if backend == "triton-interpret" else PROBLEMS[problem]
    g, x, t = (torch.randn(s, generator=gen).to(dtype).to(device) for s in shapes)
    if problem == "transposed":
        x, t = x.t(), t.t()
    call = OPS[op]
    _, ex = {
        "mse": kernels.aclnn.mse_loss_backward_get_workspace_size,
        "l1": kernels.aclnn.l1_loss_backward_get_workspace_size,
    }.get(
        op,
        lambda *a, **k: kernels.aclnn.kl_div_backward_get_workspace_size(
            a[0], a[1], a[2], "batchmean", True, a[4], **k
        ),
    )(g, x, t, 1, call(g, x, t, backend=backend), backend=backend)
    expected = call(g, x, t, backend=backend, config=ex.space.default)
    sample = ex.space.sample(20 if backend == "cpu" else 8, seed=7)  # the interpreter is slow: 8 there
    assert len(sample) >= min(8, ex.space.size)
    for config in sample:
        got = call(g, x, t, backend=backend, config=config)
        assert torch.equal(
            got.view(torch.int16 if dtype != torch.float32 else torch.int32),
            expected.view(torch.int16 if dtype != torch.float32 else torch.int32),
        ), config


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_twenty_cpu_configs_per_op_and_variant_agree(dtype: torch.dtype) -> None:
    """The issue's bar on the timed CPU backend: a sample of at least 20 configs from each space."""
    ok, why = backends.probe("cpu")
    if not ok:
        pytest.skip(why)
    gen = torch.Generator().manual_seed(4)
    g, x, t = (torch.randn(s, generator=gen).to(dtype) for s in PROBLEMS["flat"])
    space = cpu_space(backends.get("cpu").facts(), (Variant.FLAT, Variant.STRIDED), g.numel())
    sample = space.sample(20, seed=1)
    assert len(sample) == min(20, space.size)
    for name, call in OPS.items():
        ref = call(g, x, t, backend="cpu", config=space.default)
        for config in sample:
            assert torch.equal(call(g, x, t, backend="cpu", config=config), ref), (name, config)


F910B2 = DeviceFacts("npu", "ascend910b2", 48, 192 * 1024)
F910B3 = DeviceFacts("npu", "ascend910b3", 40, 192 * 1024)
F950 = DeviceFacts("npu", "ascend950", 56, 248 * 1024)


@pytest.mark.parametrize(("dtype_bytes", "expected"), [(4, 12288), (2, 8192)])
def test_npu_default_is_canns_mse_tiling(dtype_bytes: int, expected: int) -> None:
    small = npu_space(F910B2, (Variant.FLAT, Variant.STRIDED), 40000, dtype_bytes, live_buffers=4)
    assert small.default.tile == expected and not small.default.multibuffer
    assert small.default.cores == -(-40000 // expected)
    big = npu_space(F910B2, (Variant.FLAT,), 1 << 24, dtype_bytes, live_buffers=4)
    assert big.default.multibuffer and big.default.tile == expected // 2 and big.default.cores == 48
    assert big.default in big and small.default in small


def test_npu_space_respects_ub_and_core_count() -> None:
    space = npu_space(F910B3, (Variant.FLAT, Variant.STRIDED), 1 << 22, 2, live_buffers=4)
    configs = list(space)
    assert configs and max(c.cores for c in configs) == 40  # never the 910B2's 48 on a 40-core part
    assert all(c.sub_tile * 24 * (2 if c.multibuffer else 1) <= 192 * 1024 for c in configs)
    too_big = dataclasses.replace(space.default, sub_tile=12288, tile=12288, multibuffer=True)
    assert any(v.startswith("ub_budget") for v in space.violations(too_big))
    assert npu_space(F950, (Variant.FLAT,), 100, 4, 4).default.tile == 248 * 1024 // 16 // 8 * 8


def test_space_hash_is_stable_and_sensitive() -> None:
    a = cuda_space(DeviceFacts("cuda", "h100", 132), (Variant.FLAT, Variant.STRIDED), 1 << 20)
    b = cuda_space(DeviceFacts("cuda", "h100", 132), (Variant.FLAT, Variant.STRIDED), 1 << 10)
    c = cuda_space(DeviceFacts("cuda", "a100", 108), (Variant.FLAT, Variant.STRIDED), 1 << 20)
    assert a.hash == b.hash != c.hash
    assert (
        len(a.hash) == 16
        and a.hash == cuda_space(DeviceFacts("cuda", "h100", 132), (Variant.FLAT, Variant.STRIDED), 5).hash
    )


def test_cuda_seeds_are_members_with_more_bytes_in_flight_than_the_default() -> None:
    """The seeds a CUDA study starts from: legal points with larger steps at 8 programs per SM,
    as many programs as the size has steps below that, none repeating the default."""
    facts = DeviceFacts("cuda", "h200", 132)
    big = cuda_space(facts, (Variant.FLAT, Variant.STRIDED), 1 << 24)
    assert [(c.tile, c.num_warps, c.cores) for c in big.seeds] == [(4096, 8, 1056), (8192, 8, 1056), (2048, 4, 1056)]
    assert all(c in big and c.variant is Variant.FLAT and c.tile * c.cores > 4 * 132 * 1024 for c in big.seeds)
    small = cuda_space(facts, (Variant.SCALAR_GRAD, Variant.STRIDED), 5000)
    assert [c.cores for c in small.seeds] == [2, 1, 3] and all(c in small for c in small.seeds)
    tiny = cuda_space(facts, (Variant.FLAT,), 10)
    assert len(set(tiny.seeds)) == len(tiny.seeds) and tiny.default not in tiny.seeds
    assert dataclasses.replace(big, seeds=()).hash == big.hash  # starting points, not part of the space


def test_cpu_default_follows_pytorch_grain_size() -> None:
    facts = DeviceFacts("cpu", "x", 8)
    assert cpu_space(facts, (Variant.FLAT,), 1000).default.cores == 1
    assert cpu_space(facts, (Variant.FLAT,), 1 << 24).default.cores == 8


def test_config_roundtrips_and_rejects_unknown_knobs() -> None:
    config = Tiling(tile=512, cores=3, variant=Variant.STRIDED, num_warps=8)
    assert Tiling.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown knobs"):
        Tiling.from_dict({"tile": 1, "cores": 1, "blocks": 2})


def test_explicit_config_outside_the_space_is_rejected_before_writing() -> None:
    out = torch.full((4, 4), 3.0)
    with pytest.raises(kernels.AclnnError, match="config") as e:
        kernels.mse_loss_backward(
            torch.ones(4, 4),
            torch.ones(4, 4),
            torch.zeros(4, 4),
            out=out,
            backend="cpu",
            config=Tiling(tile=4096, cores=1, variant=Variant.SCALAR_GRAD),
        )
    assert e.value.code == 161002 and torch.all(out == 3.0)


def test_the_transposed_space_tunes_cores_and_streaming_and_streams_large_outs_by_default() -> None:
    """With the one tile (64 x 64 float32 words, the AVX-512 host's) the space is cores x stream;
    the default keeps the measured size rule: non-temporal stores from CPU_STREAM_OUT_BYTES of out on."""
    facts = DeviceFacts("cpu", "test-4t", 4)
    small = tiling.cpu_transposed_space(facts, 1 << 16, tiling.CPU_STREAM_OUT_BYTES - 1)
    large = tiling.cpu_transposed_space(facts, 1 << 22, tiling.CPU_STREAM_OUT_BYTES)
    assert not small.default.stream and large.default.stream
    assert small.size == large.size == 4 * 2
    assert {c.stream for c in large} == {False, True} and {c.tile for c in large} == {tiling.CPU_TRANSPOSED_TILE}
    assert small.default.cores == 2 and large.default.cores == 4  # PyTorch's grain size, as cpu_space
    assert small.hash == large.hash  # the same space: only the default moves with the size
    assert small.hash != cpu_space(facts, (Variant.STRIDED,), 1 << 16).hash
    assert Tiling(tile=1024, cores=1, variant=Variant.STRIDED) not in large
    assert Tiling(tile=tiling.CPU_TRANSPOSED_TILE, cores=1, variant=Variant.STRIDED, prefetch=1) not in large


def test_a_transposed_space_with_more_tiles_keeps_the_16_kib_default_and_hashes_apart() -> None:
    facts = DeviceFacts("cpu", "test-2t", 2)
    one = tiling.cpu_transposed_space(facts, 1 << 22, 1 << 23)
    three = tiling.cpu_transposed_space(facts, 1 << 22, 1 << 23, (4096, 16384, 32768))
    assert three.default == one.default and three.size == 3 * one.size
    assert {c.tile for c in three} == {4096, 16384, 32768} and three.hash != one.hash


def test_half_rows_are_a_knob_only_where_offered_and_the_default_keeps_the_hosts_rows() -> None:
    """rows (0,) is no knob: the space and its hash are those of a host before the knob existed,
    and a config naming another row is no member. rows (0, 32) doubles the grid and hashes apart."""
    facts = DeviceFacts("cpu", "test-2t", 2)
    before = tiling.cpu_transposed_space(facts, 1 << 22, 1 << 23)
    own = tiling.cpu_transposed_space(facts, 1 << 22, 1 << 23, rows=(0,))
    both = tiling.cpu_transposed_space(facts, 1 << 22, 1 << 23, rows=(0, 32))
    assert own == before and "transpose_row" not in dict(own.knobs)
    assert own.hash == "ede24f7948599d45"  # what the AVX-512 tier table's 2-thread transposed entries carry
    half = Tiling(tile=4096, cores=2, variant=Variant.STRIDED, transpose_row=32)
    assert half not in own and "transpose_row is not a knob of cpu" in own.violations(half)
    assert half in both and both.default == own.default and both.default.transpose_row == 0
    assert both.size == 2 * own.size and {c.transpose_row for c in both} == {0, 32} and both.hash != own.hash
    assert half.short() == "strided tile=4096 cores=2 row=32B" and Tiling.from_dict(half.to_dict()) == half


@pytest.mark.parametrize(
    ("features", "tier"),
    [
        ({"avx512f": True, "avx2": True, "fma": True}, "avx512"),
        ({"avx512f": False, "avx2": True, "fma": True}, "avx2"),
        ({"avx2": True}, ""),  # AVX2 without FMA: no tier of its own
        ({"neon": True}, ""),
    ],
)
def test_the_cpu_device_name_carries_the_vector_tier_from_mocked_llvm_features(
    features: dict[str, bool], tier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plumbing only (the host's features are mocked): the frozen table a host reads is named by its
    vector tier, so an AVX2 host never takes configs tuned where the table walk and 512-bit loops ran."""
    from kernels.backends import cpu

    monkeypatch.setattr(cpu.cpu_loops.llvm, "get_host_cpu_features", lambda: features)
    assert cpu.host_isa() == tier
    assert cpu.device_name("x86_64", 2) == (f"x86_64-{tier}-2t" if tier else "x86_64-2t")


def test_the_cpu_table_scope_names_the_device_by_tier_or_chip_and_reads_both(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Plumbing with a mocked host (an AVX-512 Zen 4): the tuner writes the tier's table unless told
    to write the chip's; lookups read the chip's first either way."""
    from kernels.backends import cpu

    monkeypatch.setattr(cpu.cpu_loops.llvm, "get_host_cpu_features", lambda: {"avx512f": True})
    monkeypatch.setattr(cpu.cpu_loops.llvm, "get_host_cpu_name", lambda: "znver4")
    both = ("x86_64-avx512-znver4-2t", "x86_64-avx512-2t")
    monkeypatch.delenv(cpu.SCOPE_ENV, raising=False)
    assert cpu.cpu_facts("x86_64", 2) == DeviceFacts("cpu", "x86_64-avx512-2t", 2, tables=both)
    monkeypatch.setenv(cpu.SCOPE_ENV, "microarch")
    assert cpu.cpu_facts("x86_64", 2).name == "x86_64-avx512-znver4-2t"
    assert cpu.cpu_facts("x86_64", 2).lookup_names == both
    monkeypatch.setenv(cpu.SCOPE_ENV, "chip")
    with pytest.raises(ValueError, match="LOSSTUNE_CPU_TABLE_SCOPE: expected one of tier, microarch, got 'chip'"):
        cpu.cpu_facts("x86_64", 2)
    monkeypatch.setattr(cpu.cpu_loops.llvm, "get_host_cpu_name", lambda: "generic")  # no chip known: the tier alone
    monkeypatch.delenv(cpu.SCOPE_ENV)
    assert cpu.cpu_facts("x86_64", 2).lookup_names == ("x86_64-avx512-2t",)


def test_this_hosts_cpu_device_name_is_its_tier_and_threads() -> None:
    import platform

    from kernels.backends import cpu, cpu_loops

    name = backends.get("cpu").facts().name
    assert name == cpu.device_name(platform.machine(), cpu_loops.max_threads())
    assert name.endswith(f"-{cpu_loops.max_threads()}t") and (not cpu.host_isa() or f"-{cpu.host_isa()}-" in name)


def test_the_loops_gates_and_the_device_name_follow_numbas_cross_compile_switches() -> None:
    """NUMBA_CPU_NAME / NUMBA_CPU_FEATURES make numba compile for another CPU; the loops' feature
    gates and the device name must follow them (tuner.restamp --target relies on it), not the host."""
    code = (
        "from kernels.backends import cpu, cpu_loops as L\n"
        "print(L.target_cpu(), cpu.host_isa(), L.HAS_BF16, L.HAS_SCALEF, L.HAS_F16C, L.TRANSPOSE_BYTES,"
        " L.CHECKED_SCALE, L.TILES_APART)\n"
    )
    env = {"NUMBA_CPU_NAME": "znver3", "NUMBA_CPU_FEATURES": "+avx2,+fma,+f16c,-avx512f,-avx512bf16"}
    assert run_fresh(code, env) == "znver3 avx2 False False True 32 True True"
    env = {"NUMBA_CPU_NAME": "znver4", "NUMBA_CPU_FEATURES": "+avx2,+fma,+avx512f,+avx512bf16,-f16c"}
    assert run_fresh(code, env) == "znver4 avx512 True True False 64 False False"
    # The Zen 5 has vscalefps and still takes the checked twin (cpu_loops._CHECKED_CPUS), apart.
    env = {"NUMBA_CPU_NAME": "znver5", "NUMBA_CPU_FEATURES": "+avx2,+fma,+f16c,+avx512f,+avx512bf16"}
    assert run_fresh(code, env) == "znver5 avx512 True True True 64 True True"
