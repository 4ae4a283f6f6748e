"""The probes' shared pieces: every row's contiguous case, a row's contiguous and transposed cases,
an old revision's CPU backend, the printout of each run's median and its per-round ratios over the
first run (or over a named run, as a markdown table), and the build of a probe's C source into a
shared library."""

from __future__ import annotations

import ctypes
import dataclasses
import pathlib
import statistics
import subprocess
from collections.abc import Callable, Iterator, Sequence

import torch

from kernels import timing
from kernels.backends.cpu import CpuBackend
from kernels.executor import Executor
from kernels.modes import Op, Reduction
from tuner.problems import Case, InputLayout
from tuner.restamp import _load, as_launched_today, git_sources


def backend_at(commit: str) -> CpuBackend:
    """A CPU backend on the loops at ``commit`` (loaded from git beside today's, as tuner.restamp
    does), shaped as today's launch calls them."""
    sources = git_sources(commit)
    assert sources is not None, f"no sources at {commit}"
    print(f"# old loops: {commit}")
    return CpuBackend(as_launched_today(_load("old_cpu_loops", sources.loops)))


def every_case(n: int) -> Iterator[Case]:
    """The contiguous case at n elements of every op (KL log_target both ways) x dtype x gradient
    kind (none: full, mean: 0-d), in the reports' order."""
    for op, log in ((Op.MSE, False), (Op.L1, False), (Op.KL_DIV, False), (Op.KL_DIV, True)):
        for dtype in (torch.float32, torch.float16, torch.bfloat16):
            for reduction in (Reduction.NONE, Reduction.MEAN):
                yield Case(op, dtype, (n,), reduction, log_target=log)


def row_cases(spec: str, n: int) -> tuple[Executor, Case, torch.dtype, tuple[torch.Tensor, ...]]:
    """``spec`` (OP:DTYPE:REDUCTION, OP with -log for KL log_target) at n elements: the contiguous
    case's executor on the host's tables, the transposed case, its dtype and its inputs."""
    op, dt, red = spec.split(":")
    log, dtype, reduction = op.endswith("-log"), getattr(torch, dt), Reduction[red.upper()]
    plain = Case(Op(op.removesuffix("-log")), dtype, (n,), reduction, log_target=log)
    g, x, t = plain.inputs("cpu")
    contiguous = plain.phase_one(g, x, t, plain.out_like(x), "cpu")
    case = dataclasses.replace(plain, layout=InputLayout.TRANSPOSED)
    return contiguous, case, dtype, case.inputs("cpu")


def print_ratios(title: str, names: Sequence[str], runs: Sequence[Callable[[object], object]], rounds: int) -> None:
    """Time ``runs`` in interleaved rounds and print, under ``title``, each one's median (us) and the
    median (min-max) of its per-round ratio over runs[0]."""
    measured = timing.interleaved(runs, rounds=rounds, min_time_s=0.15)
    print(title, flush=True)
    for name, r in zip(names, measured, strict=True):
        ratios = [a / b for a, b in zip(r.medians, measured[0].medians, strict=True)]
        print(
            f"  {name}: {r.median_s * 1e6:.0f} us {statistics.median(ratios):.2f}"
            f" ({min(ratios):.2f}-{max(ratios):.2f})",
            flush=True,
        )


def build_c(source: pathlib.Path, tmp: str, libs: Sequence[str] = ()) -> ctypes.CDLL:
    """``source`` built with gcc -O3 -march=native -fopenmp into a shared library under ``tmp``, loaded."""
    lib = pathlib.Path(tmp, source.with_suffix(".so").name)
    cmd = ["gcc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", str(source), "-o", str(lib), *libs]
    subprocess.run(cmd, check=True)
    return ctypes.CDLL(str(lib))


def ratio_table(runs: dict[str, Callable[[int], object]], rounds: int, base: str) -> dict[str, list[float]]:
    """Time ``runs`` in interleaved rounds and print a markdown table: each run's median (us) and
    the median (min-max) of its per-round ratio over the run named ``base``. Returns each run's
    per-round medians (seconds)."""
    timed = timing.interleaved(list(runs.values()), rounds=rounds, min_time_s=0.15)
    times = {k: list(t.medians) for k, t in zip(runs, timed, strict=True)}
    print(f"| run | median us | over {base} |")
    print("|---|---|---|")
    for k, v in times.items():
        r = [a / b for a, b in zip(v, times[base], strict=True)]
        print(f"| {k} | {statistics.median(v) * 1e6:.0f} | {statistics.median(r):.2f} ({min(r):.2f}-{max(r):.2f}) |")
    return times
