"""Section 56 of results/performance.md: KL log_target's broadcast sums take Formula.sum_value, a
degree-5 exp with a one-fma reduction, where they took the float32 formula's degree-7 exp with a
two-fma one. The same walk and order either way; only the terms' formula differs.

Input (1, C) against target (R, C) at about 2^n elements of the broadcast shape B (R = 64: the
report's summed rows; R = 6), and section 53's (R, 1) against (R, C) with ``blocked``; each dtype,
a 0-d gradient (mean) and one of B's shape (none), in interleaved rounds in one process: the
contiguous case of B's size, the walk with the float32 formula's terms (``value``), with the sum
formula's (``sum_value``), and PyTorch's eager expression and sum; medians (us) and each one's
per-round ratio over the contiguous case. Both outputs are checked within SEMANTICS' bar for a
broadcast sum first. Not part of the package: run by hand, as

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/sum_exp.py 22 5 [64,6 | blocked]
"""

from __future__ import annotations

import dataclasses
import sys

import torch
from _rounds import print_ratios
from reduce_blocked import geometries as blocked

from kernels import aclnn, backends
from kernels.backends.cpu import CpuBackend
from kernels.executor import Executor
from kernels.ops import kl_div


def geometries(n: int, rows: tuple[int, ...]) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    return {f"(1, C) against ({r}, C)": ((1, n // r), (r, n // r)) for r in rows}


def check(out: torch.Tensor, g: torch.Tensor, x: torch.Tensor, t: torch.Tensor, reduction: str, title: str) -> None:
    """SEMANTICS: within 1e-5 of the summed magnitudes, then the output dtype's rounding."""
    ref = kl_div.reference(g, x, t, reduction, True)
    scale = t.numel() if reduction == "mean" else 1
    terms = torch.exp(t.double()).abs() * g.double().abs() / scale
    bound = 1e-5 * terms.sum_to_size(x.shape) + torch.finfo(out.dtype).eps * (ref.abs() + torch.finfo(out.dtype).tiny)
    assert ((out.double() - ref).abs() <= bound).all(), title


def one_row(
    cpu: CpuBackend, title: str, xs: tuple[int, ...], ts: tuple[int, ...], reduction: str, dtype: torch.dtype
) -> tuple[str, tuple[str, ...], tuple[object, ...]]:
    """One geometry, gradient kind and dtype: its title, run names and runs, both outputs checked first."""
    gen = torch.Generator().manual_seed(0)
    gs = () if reduction == "mean" else torch.broadcast_shapes(xs, ts)
    g = (torch.randn(gs, generator=gen) * 1.5 + 0.25).to(dtype)
    x, t = torch.randn(xs, generator=gen).to(dtype), torch.rand(ts, generator=gen).to(dtype)
    full, outs = torch.empty(ts, dtype=dtype), [torch.empty(xs, dtype=dtype) for _ in range(2)]

    def plan(inp: torch.Tensor, out: torch.Tensor) -> Executor:
        return aclnn.kl_div_backward_get_workspace_size(g, inp, t, reduction, True, out, backend="cpu")[1]

    contiguous, ex_sum = plan(full, full), plan(x, outs[1])
    # The float32 formula's terms: the same plan under a formula without a sum_value, named apart
    # so that the backend builds its loops apart.
    wide = dataclasses.replace(kl_div.FORMULA_LOG, name="kl_div_log_wide_terms", sum_value=None)
    ex_wide = dataclasses.replace(plan(x, outs[0]), formula=wide)
    cpu.launch(ex_wide)
    cpu.launch(ex_sum)
    name = f"{title}, kl_div-log {str(dtype).removeprefix('torch.')}"
    for out in outs:
        check(out, g, x, t, reduction, name)
    return (
        f"{name}, {'0-d' if reduction == 'mean' else 'full'} gradient",
        ("contiguous", "value (degree 7)", "sum_value (degree 5)", "vendor"),
        (
            lambda _: cpu.launch(contiguous),
            lambda _: cpu.launch(ex_wide),
            lambda _: cpu.launch(ex_sum),
            lambda _: kl_div.vendor_baseline(g, x, t, reduction, True),
        ),
    )


def main() -> None:
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    which = sys.argv[3] if len(sys.argv) > 3 else "64,6"
    shapes_of = blocked(n) if which == "blocked" else geometries(n, tuple(map(int, which.split(","))))
    cpu = backends.get("cpu")
    for title, (xs, ts) in shapes_of.items():
        for reduction in ("mean", "none"):
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                print_ratios(*one_row(cpu, title, xs, ts, reduction, dtype), rounds)


if __name__ == "__main__":
    main()
