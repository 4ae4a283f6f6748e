"""The CPU backend's software prefetch knob and the compute-bound formulas' 512-bit vector hint.

Prefetching is a hint and must not change a bit: every prefetch distance gives what prefetch 0
gives, for both contiguous loops, every dtype, ragged sizes (tails shorter than a line, a tile, a
block) and both core counts. The hint is checked where it acts: in the LLVM IR numba compiled.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import kernels
from kernels import backends
from kernels.backends import cpu_loops
from kernels.modes import Variant
from kernels.ops import kl_div, mse
from kernels.tiling import CPU_PREFETCH, Tiling, cpu_space
from tests.helpers import CALLS, as_bits, every_loop_case

pytestmark = pytest.mark.usefixtures("cpu_backend")


@every_loop_case
def test_every_prefetch_distance_gives_the_same_bits(op: str, dtype: torch.dtype, n: int, reduction: str) -> None:
    gen = torch.Generator().manual_seed(n)
    x, t = torch.randn(n, generator=gen).to(dtype), torch.randn(n, generator=gen).to(dtype)
    g = torch.randn(n, generator=gen).to(dtype) if reduction == "none" else torch.tensor(0.75).to(dtype)
    # A 0-d gradient of a one-element problem is planned as flat (every operand has one element).
    variant = Variant.FLAT if reduction == "none" or n == 1 else Variant.SCALAR_GRAD
    cores = range(1, min(2, cpu_loops.max_threads()) + 1)
    want = as_bits(CALLS[op](g, x, t, reduction, backend="cpu", config=Tiling(256, 1, variant)))
    for c in cores:
        for ahead in CPU_PREFETCH:
            got = CALLS[op](g, x, t, reduction, backend="cpu", config=Tiling(256, c, variant, prefetch=ahead))
            assert torch.equal(as_bits(got), want), f"cores={c} prefetch={ahead}"


def test_prefetch_is_a_knob_of_the_contiguous_variants_only() -> None:
    space = cpu_space(backends.get("cpu").facts(), (Variant.FLAT, Variant.STRIDED), 1 << 20)
    assert {c.prefetch for c in space if c.variant is Variant.FLAT} == set(CPU_PREFETCH)
    assert {c.prefetch for c in space if c.variant is Variant.STRIDED} == {0}
    assert space.default.prefetch == 0  # the untuned baseline: what PyTorch does, no software prefetch
    strided = Tiling(4096, 1, Variant.STRIDED, prefetch=1)
    assert "prefetch_contiguous" in " ".join(space.violations(strided))
    with pytest.raises(kernels.AclnnError, match="prefetch_contiguous"):
        x = torch.randn(64, 64).t()
        kernels.mse_loss_backward(torch.randn(64, 64), x, torch.randn(64, 64), "none", backend="cpu", config=strided)


def _loop_ir(formula: object, compute_bound: bool) -> str:
    """The LLVM IR numba built for the one-core scalar_grad loop of ``formula``, float32 operands."""
    loops = cpu_loops.make_cpu_kernels(formula.value, compute_bound)  # type: ignore[attr-defined]
    a, tag = np.zeros(64, np.float32), np.empty(0, np.float32)
    p = a.ctypes.data
    loops.scalar_grad[0](p, p, p, p, tag, tag, tag, tag, 64, 1.0, 16, 0, 1, False)  # tile 16, 1 core, plain
    return "\n".join(loops.scalar_grad[0].inspect_llvm().values())


def test_only_compute_bound_formulas_ask_for_512_bit_vectors() -> None:
    assert kl_div.FORMULA_LOG.compute_bound and not kl_div.FORMULA.compute_bound and not mse.FORMULA.compute_bound
    assert '"prefer-vector-width"="512"' in _loop_ir(kl_div.FORMULA_LOG, True)
    assert "prefer-vector-width" not in _loop_ir(mse.FORMULA, False)
