"""Section 97 of results/performance.md: KL log_target's 0-d contiguous loop on the Xeon, float16
against bfloat16 (narrow and coarse exp), in one process, interleaved rounds.

Each set's scalar_grad loop is called directly (as CpuBackend launches it): one core up to 2^18,
two above; ns per 16 elements per core, medians and the rounds' range. float16 takes the loops
_loop_set gives a float16 out of a float16 gradient (narrow, half); bfloat16 the narrow set (what
this host runs today) and the coarse one (section 90's degree-2 exp, Zen 5 only so far).

    python loops.py 13 16 22 24
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

import torch

from kernels.backends import cpu, cpu_loops
from kernels.ops import kl_div

ROUNDS = 9
LOG = kl_div.FORMULA_LOG


def loop_args(n: int, dtype: torch.dtype, cores: int):
    """The tensors to keep alive, and a scalar_grad loop's arguments (but stream) over them."""
    torch.manual_seed(0)
    t = (-torch.rand(n) * 8).to(dtype)  # log-probabilities: every tile takes the twin
    g = torch.tensor(0.5, dtype=dtype)
    out = torch.ones(n, dtype=dtype)
    tag = cpu.TAGS[dtype]
    keep = (g, t, out)
    return keep, (
        g.data_ptr(),
        t.data_ptr(),
        t.data_ptr(),
        out.data_ptr(),
        tag,
        tag,
        tag,
        tag,
        n,
        1.0 / n,
        4096,
        0,
        cores,
    )


def loop_sets() -> dict[str, tuple[torch.dtype, cpu_loops.CpuKernels]]:
    """The three loop sets compared, by name: each one's dtype and loops (asm.py dumps the same)."""
    return {
        "float16 (half)": (torch.float16, cpu.BACKEND.kernels(LOG, True, half=True)),
        "bfloat16 narrow": (torch.bfloat16, cpu.BACKEND.kernels(LOG, True)),
        "bfloat16 coarse": (torch.bfloat16, cpu.BACKEND.kernels(LOG, True, coarse=True)),
    }


def main() -> None:
    warnings.simplefilter("ignore")
    sets = loop_sets()
    print(f"# host {cpu_loops.target_cpu()}, coarse offered here: {cpu.coarse_offered()}; ns per 16 elements per core")
    for e in (int(a) for a in sys.argv[1:]):
        n = 1 << e
        cores = 1 if n <= 1 << 18 else 2
        reps = max(5, (1 << 24) // n)
        made = {name: loop_args(n, dtype, cores) for name, (dtype, _) in sets.items()}
        times: dict[str, list[float]] = {name: [] for name in sets}
        for rnd in range(ROUNDS):
            for name in list(sets) if rnd % 2 == 0 else list(sets)[::-1]:
                fn = sets[name][1].scalar_grad[cores > 1]
                args = made[name][1]
                if cores > 1:
                    cpu_loops.set_threads(cores)
                fn(*args, False)
                start = time.perf_counter()
                for _ in range(reps):
                    fn(*args, False)
                times[name].append((time.perf_counter() - start) / reps / (n / 16) * 1e9 * cores)
        base = times["bfloat16 narrow"]
        cells = []
        for name, ts in times.items():
            r = [a / b for a, b in zip(ts, base, strict=True)]
            cells.append(
                f"{name} {statistics.median(ts):.3f} ({min(ts):.3f}-{max(ts):.3f}) x{statistics.median(r):.3f}"
            )
        print(f"2^{e} ({cores} core): " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
