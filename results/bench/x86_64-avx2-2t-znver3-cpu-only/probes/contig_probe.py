"""Section 82: the config the lookup gives one contiguous case, against the default and the configs
given (KEY=VALUE,... of tile, prefetch, stream), and a torch copy of the same bytes (half read, half
written), in interleaved rounds in one process; outputs bit for bit against the lookup's first.

    python results/bench/<host>/probes/contig_probe.py OP DTYPE LOG2 REDUCTION ROUNDS [CONFIG ...]

Output: ``contig-mse-float16-2p24.txt``. Not part of the package."""

import sys

import torch

sys.path.insert(0, "results/bench/x86_64-avx2-2t-znver3-cpu-only/probes")
from probe_args import case as case_of  # noqa: E402
from probe_args import configs as configs_of  # noqa: E402
from transposed_tiles import over  # noqa: E402

from kernels import dispatch, timing  # noqa: E402
from kernels.backends import cpu_loops  # noqa: E402


def main() -> None:
    case, rounds = case_of(*sys.argv[1:5]), int(sys.argv[5])
    dtype = case.dtype
    g, x, t = case.inputs("cpu")
    looked = case.phase_one(g, x, t, case.out_like(x), "cpu")
    default = looked.space.default
    others = [default, *configs_of(default, sys.argv[6:])]
    configs = [looked.config] + [c for c in others if c != looked.config]
    exs = [looked] + [case.phase_one(g, x, t, case.out_like(x), "cpu", config=c) for c in configs[1:]]
    moved = sum(a.numel() * a.element_size() for a in (g, x, t)) + exs[0].out.numel() * exs[0].out.element_size()
    src = torch.empty(moved // 2 // 4, dtype=torch.float32)
    dst = torch.empty_like(src)
    bits = torch.int16 if dtype.itemsize == 2 else torch.int32
    for ex in exs:
        dispatch.run(ex)
    for ex in exs[1:]:
        assert torch.equal(ex.out.view(bits), exs[0].out.view(bits))
    runs = [lambda _, e=e: dispatch.run(e) for e in exs] + [lambda _: dst.copy_(src)]
    m = timing.interleaved(runs, rounds=rounds, min_time_s=0.1)
    base = m[configs.index(default)].medians
    print(
        f"# {cpu_loops.target_cpu()}, {case.label()}, {rounds} rounds, min_time 0.1 s; lookup: {looked.config_source}"
    )
    print("| config | us | over the default: median (min-max) | GB/s | copy time over the config's, by round |")
    print("|---|---|---|---|---|")
    for i, c in enumerate(configs):
        lab = c.short() + (" (lookup)" if i == 0 else "")
        speed, of_copy = f"{moved / m[i].median_s / 1e9:.1f}", over(m[-1].medians, m[i].medians)
        print(f"| {lab} | {m[i].median_s * 1e6:.0f} | {over(m[i].medians, base)} | {speed} | {of_copy} |")
    print(f"| torch copy_ | {m[-1].median_s * 1e6:.0f} | | {moved / m[-1].median_s / 1e9:.1f} | |")


if __name__ == "__main__":
    main()
