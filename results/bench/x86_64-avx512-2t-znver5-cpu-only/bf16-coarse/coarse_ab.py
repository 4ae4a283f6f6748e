"""Section 90 of results/performance.md: KL log_target's bfloat16 0-d loops with the narrow (degree-3)
and the coarse (degree-2) exp, on one host, in one process, interleaved rounds.

``loop``: the contiguous scalar_grad loop of each set called directly (as CpuBackend launches it),
one core up to 2^18, two above, ns per 16 elements per core. ``call``: the public call into a given
out, the backend's coarse switch (CpuBackend.coarse) off and on, its plans dropped at each switch;
the config is whatever the tables give the problem (the same for both). Ratios are coarse over
narrow, per round; medians and the rounds' range. Also the copy of the same bytes (torch, 2
threads), which decides the larger sizes.

    python coarse_ab.py loop 13 16 22
    python coarse_ab.py call 20 22 24
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

import torch

import kernels
from kernels import dispatch
from kernels.backends import cpu, cpu_loops
from kernels.ops import kl_div

ROUNDS = 9
LOG = kl_div.FORMULA_LOG
TAG = cpu.TAGS[torch.bfloat16]


def _problem(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    t = (-torch.rand(n) * 8).to(torch.bfloat16)  # log-probabilities: every tile takes the twin
    return torch.tensor(0.5, dtype=torch.bfloat16), t, torch.ones(n, dtype=torch.bfloat16)


def _loop(n: int) -> dict[str, float]:
    """Seconds per call of each set's scalar_grad loop, per round."""
    g, t, out = _problem(n)
    sets = {"narrow": cpu.BACKEND.kernels(LOG, True), "coarse": cpu.BACKEND.kernels(LOG, True, coarse=True)}
    cores = 1 if n <= 1 << 18 else 2
    reps = max(5, (1 << 24) // n)
    args = (g.data_ptr(), t.data_ptr(), t.data_ptr(), out.data_ptr(), TAG, TAG, TAG, TAG, n, 1.0 / n, 4096, 0, cores)
    times: dict[str, list[float]] = {name: [] for name in sets}
    for rnd in range(ROUNDS):
        for name in list(sets) if rnd % 2 == 0 else list(sets)[::-1]:
            fn = sets[name].scalar_grad[cores > 1]
            if cores > 1:
                cpu_loops.set_threads(cores)
            fn(*args, False)
            start = time.perf_counter()
            for _ in range(reps):
                fn(*args, False)
            times[name].append((time.perf_counter() - start) / reps)
    return {"cores": cores, **times}


def _call(n: int) -> dict[str, float]:
    """Median seconds of the public call with the switch off (narrow) and on (coarse), per round."""
    g, t, out = _problem(n)
    x = torch.zeros(n, dtype=torch.bfloat16)
    reps = max(5, (1 << 26) // n // 4)
    times: dict[str, list[float]] = {"narrow": [], "coarse": []}
    for rnd in range(ROUNDS):
        for on in (False, True) if rnd % 2 == 0 else (True, False):
            cpu.BACKEND.coarse = on
            dispatch.clear_plans()
            kernels.kl_div_backward(g, x, t, "mean", True, out=out)
            each = []
            for _ in range(reps):
                start = time.perf_counter()
                kernels.kl_div_backward(g, x, t, "mean", True, out=out)
                each.append(time.perf_counter() - start)
            times["coarse" if on else "narrow"].append(statistics.median(each))
    return {"cores": 2, **times}


def _copy(n: int) -> float:
    """Median seconds of torch's copy of n bfloat16 elements (the roofline's bytes: read n, write n)."""
    torch.set_num_threads(2)
    a, b = torch.ones(n, dtype=torch.bfloat16), torch.ones(n, dtype=torch.bfloat16)
    each = []
    for _ in range(30):
        start = time.perf_counter()
        b.copy_(a)
        each.append(time.perf_counter() - start)
    return statistics.median(each)


def main() -> None:
    warnings.simplefilter("ignore")  # tables' notes on entries the lookup passes over
    how, sizes = sys.argv[1], [int(a) for a in sys.argv[2:]]
    print(f"# {how}: host {cpu_loops.target_cpu()}, coarse offered here: {cpu.coarse_offered()}")
    for e in sizes:
        n = 1 << e
        got = (_loop if how == "loop" else _call)(n)
        cores = got.pop("cores")
        ratios = [c / a for a, c in zip(got["narrow"], got["coarse"], strict=True)]
        med = {k: statistics.median(v) for k, v in got.items()}
        copy = _copy(n)
        if how == "loop":
            per = {k: v / (n / 16) * 1e9 * cores for k, v in med.items()}
            times = f"narrow {per['narrow']:.3f}, coarse {per['coarse']:.3f} ns per 16 per core ({cores} core)"
        else:
            times = f"narrow {med['narrow'] * 1e6:.1f} us, coarse {med['coarse'] * 1e6:.1f} us"
        print(
            f"2^{e}: {times}; coarse/narrow {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}); "
            f"copy {copy * 1e6:.1f} us ({4 * n / copy / 1e9:.1f} GB/s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
