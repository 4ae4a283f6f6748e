"""Section 51 of results/performance.md: KL's sum back to input's shape (the REDUCE layout), the
walks of 563e211 (across outputs as lanes; along the summed dims in 64 fixed lanes) against the
one-output-at-a-time walk at OLD that they replaced, and against PyTorch's eager expression and
sum (kl_div.vendor_baseline).

For each geometry at 2^n elements of B = broadcast(input, target), KL plain and log_target, each
dtype, a 0-d gradient (mean, as autograd sends it), in interleaved rounds in one process: the
contiguous case of B's size (this host's tables), the old walk, today's walk and the vendor; medians
(us) and each one's per-round ratio over the contiguous case. Old and new outputs are checked
bitwise equal first where the order did not change (across outputs), and within SEMANTICS' 1e-5 of
the summed magnitudes where it did (along the summed dims). Not part of the package: run by hand, as

    python results/bench/x86_64-avx512-2t-znver4-cpu-only/probes/reduce_walk.py 22 5
"""

from __future__ import annotations

import sys

import torch
from _rounds import backend_at, print_ratios

from kernels import aclnn, backends
from kernels.backends import cpu
from kernels.ops import kl_div

OLD = "c8c2077"  # the last commit with the one-output-at-a-time walk


def geometries(n: int) -> dict[str, tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input, target) shapes of n elements of B."""
    return {
        "rows summed: (C,) against (64, C)": ((n // 64,), (64, n // 64)),
        "a row each: (64, 1) against (64, C)": ((64, 1), (64, n // 64)),
        "all summed: (1,) against (n,)": ((1,), (n,)),
        "short rows: (R, 1) against (R, 64)": ((n // 64, 1), (n // 64, 64)),
    }


def one_row(
    old: cpu.CpuBackend,
    new: cpu.CpuBackend,
    title: str,
    shapes: tuple[tuple[int, ...], ...],
    log: bool,
    dtype: torch.dtype,
    reduction: str = "mean",
    old_commit: str = OLD,
    same_bits: bool = True,
) -> tuple[str, tuple[str, ...], tuple[object, ...]]:
    """One geometry, formula and dtype: its title, run names and runs, outputs checked first (old
    and new bitwise equal, unless the new walk sums along the summed dims or ``same_bits`` is false:
    then the new within SEMANTICS' bar). The gradient is 0-d (mean) or of B's shape (none)."""
    (xs, ts), gen = shapes, torch.Generator().manual_seed(0)
    gs = () if reduction == "mean" else torch.broadcast_shapes(xs, ts)
    g = (torch.randn(gs, generator=gen) * 1.5 + 0.25).to(dtype)
    x, t = torch.randn(xs, generator=gen).to(dtype), torch.rand(ts, generator=gen).to(dtype)
    full, outs = torch.empty(ts, dtype=dtype), [torch.empty(xs, dtype=dtype) for _ in range(2)]

    def plan(inp: torch.Tensor, out: torch.Tensor) -> object:
        return aclnn.kl_div_backward_get_workspace_size(g, inp, t, reduction, log, out, backend="cpu")[1]

    contiguous, ex_old, ex_new = plan(full, full), plan(x, outs[0]), plan(x, outs[1])
    old.launch(ex_old)
    new.launch(ex_new)
    along = cpu._reduce_build(ex_new.geometry, 2)[0]
    if along or not same_bits:  # SEMANTICS: within 1e-5 of the summed magnitudes, then the output dtype's rounding
        ref = kl_div.reference(g, x, t, reduction, log)
        scale = t.numel() if reduction == "mean" else 1
        terms = (torch.exp(t.double()) if log else t.double()).abs() * g.double().abs() / scale
        # the output dtype's rounding: a unit in the last place, the subnormals' below its smallest normal
        bound = 1e-5 * terms.sum_to_size(xs) + torch.finfo(dtype).eps * (ref.abs() + torch.finfo(dtype).tiny)
        assert ((outs[1].double() - ref).abs() <= bound).all(), title
    else:
        assert torch.equal(outs[0], outs[1]), title
    name = f"{title}, {'kl_div-log' if log else 'kl_div'} {str(dtype).removeprefix('torch.')}"
    return (
        f"{name} ({'along the summed dims' if along else 'across outputs'})",
        ("contiguous", f"old ({old_commit})", "new", "vendor"),
        (
            lambda _: new.launch(contiguous),
            lambda _: old.launch(ex_old),
            lambda _: new.launch(ex_new),
            lambda _: kl_div.vendor_baseline(g, x, t, reduction, log),
        ),
    )


def main() -> None:
    n, rounds = 1 << int(sys.argv[1]), int(sys.argv[2])
    old, new = backend_at(OLD), backends.get("cpu")
    for title, shapes in geometries(n).items():
        for log in (False, True):
            for dtype in (torch.float32, torch.float16, torch.bfloat16):
                print_ratios(*one_row(old, new, title, shapes, log, dtype), rounds)


if __name__ == "__main__":
    main()
