"""Test-side wrappers of kernels.accuracy (the one accuracy bar shared with the tuner), a
fresh-process runner for builds chosen at import time, processes that crowd a CPU, and the public
calls and cases the CPU loop-knob tests (prefetch, stream) sweep, with the decorator that sweeps them."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
import torch

import kernels
from kernels.accuracy import mismatch, ulps_for

_Loops = TypeVar("_Loops")

__all__ = [
    "CALLS",
    "DTYPES",
    "LOOP_SIZES",
    "as_bits",
    "cached",
    "assert_within",
    "count_copy_runs",
    "count_journal_storages",
    "every_loop_case",
    "run_fresh",
    "spinning_on",
    "ulps_for",
]

ROOT = Path(__file__).resolve().parents[1]


def assert_within(
    out: torch.Tensor, ref: torch.Tensor, ulps: float, *, rel_to: torch.Tensor | None = None, rel: float = 0.0
) -> None:
    problem = mismatch(out, ref, ulps, rel_to=rel_to, rel=rel)
    assert problem is None, problem


def count_copy_runs(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Plumbing: counts the runs of every copy ``timing.copy_probe`` hands out (the copies are real)
    and makes the per-process cached ``timing.copy_bandwidth`` fail if anything reads it."""
    from kernels import timing

    calls = {"copy": 0}
    real_probe = timing.copy_probe

    def counted(device: str, nbytes: int) -> tuple[Callable[[int], object], int]:
        run, moved = real_probe(device, nbytes)

        def counting(i: int) -> object:
            calls["copy"] += 1
            return run(i)

        return counting, moved

    def cached(*_: object) -> float:
        raise AssertionError("the cached copy bandwidth was read where a copy timed in the rounds was due")

    monkeypatch.setattr(timing, "copy_probe", counted)
    monkeypatch.setattr(timing, "copy_bandwidth", cached)
    return calls


def count_journal_storages(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Plumbing: a spy on optuna's journal storage, which appends to the list it returns each time
    one is constructed (each construction replays the whole journal); the storages are real."""
    import optuna

    made: list[str] = []

    class Counted(optuna.storages.JournalStorage):
        def __init__(self, *args: object, **kwargs: object) -> None:
            made.append("journal")
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(optuna.storages, "JournalStorage", Counted)
    return made


def run_fresh(code: str, env: dict[str, str], unset: tuple[str, ...] = ()) -> str:
    """Run ``code`` in a new interpreter at the repository root with ``env`` added and the variables
    ``unset`` removed (the CPU backend picks its instruction builds when it is imported) and return
    what it printed."""
    kept = {k: v for k, v in os.environ.items() if k not in unset}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**kept, **env}, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout.strip()


def assert_cpu_pick(
    monkeypatch: pytest.MonkeyPatch,
    pick: Callable[[], bool],
    switch: str,
    cases: tuple[tuple[str | None, str, bool], ...],
) -> None:
    """A backends.cpu pick by the CPU numba compiles for: ``pick()`` is each case's want, with
    cpu_loops.target_cpu saying its CPU and ``switch`` unset (None) or set to its value; then a value
    other than 0 or 1 is refused by name."""
    from kernels.backends import cpu_loops

    for value, cpu_name, want in cases:
        monkeypatch.setattr(cpu_loops, "target_cpu", lambda name=cpu_name: name)
        if value is None:
            monkeypatch.delenv(switch, raising=False)
        else:
            monkeypatch.setenv(switch, value)
        assert pick() is want, (switch, value, cpu_name)
    monkeypatch.setenv(switch, "yes")
    with pytest.raises(ValueError, match=f"{switch}: expected 0 or 1, got 'yes'"):
        pick()


def refused_in_fresh_process(knob: str, call: str, env: dict[str, str]) -> None:
    """A config naming ``knob`` (``knob=...`` in a Tiling) where ``env`` keeps it out of the space:
    ``call`` (kernels.<call> on a transposed 64 x 128 tensor t, into an out of 7s, ``out=out,
    config=c`` appended) is refused (an AclnnError) naming the knob, and out keeps every 7."""
    code = (
        "import torch, kernels\n"
        "from kernels.modes import Variant\n"
        "from kernels.tiling import Tiling\n"
        "t = torch.rand(64, 128).t()\n"
        "out = torch.full((128, 64), 7.0)\n"
        f"c = Tiling(4096, 1, Variant.STRIDED, {knob})\n"
        "try:\n"
        f"    kernels.{call}, out=out, config=c)\n"
        "except Exception as e:\n"
        f"    print(type(e).__name__, '{knob.split('=')[0]} is not a knob' in str(e), bool((out == 7).all()))\n"
    )
    printed = run_fresh(code, env)
    assert printed.split() == ["AclnnError", "True", "True"], printed


@contextmanager
def spinning_on(cpu: int, count: int) -> Iterator[None]:
    """``count`` processes spinning on CPU ``cpu`` while the block runs: real contention for the
    scheduler-time tests (kernels.timing.cpu_wait). Each pins itself before it says it is ready, so
    the block starts with all of them runnable there; each stops at the block's end, or after 300 s
    if this process dies first."""
    spin = f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nprint(flush=True)\nend = time.time() + 300\n"
    spin += "while time.time() < end: pass"
    spinners: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            spinners.append(subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE))
        for p in spinners:
            ready = p.stdout.readline() if p.stdout is not None else b""
            if ready != b"\n":
                raise RuntimeError(f"a spinner did not start: it printed {ready!r}")
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LOOP_SIZES = (1, 37, 1000, 4096 + 13, 3 * 4096)  # below a line, ragged, tile-ragged, whole tiles
CALLS = {  # every op and KL mode by its tuner name, through the public API
    "mse": lambda g, x, t, red, **kw: kernels.mse_loss_backward(g, x, t, red, **kw),
    "l1": lambda g, x, t, red, **kw: kernels.l1_loss_backward(g, x, t, red, **kw),
    "kl_div": lambda g, x, t, red, **kw: kernels.kl_div_backward(g, x, t, red, False, **kw),
    "kl_div-log": lambda g, x, t, red, **kw: kernels.kl_div_backward(g, x, t, red, True, **kw),
}


def as_bits(v: torch.Tensor) -> torch.Tensor:
    """The raw bits of a float tensor, for bitwise comparisons (torch.equal treats -0.0 == 0.0)."""
    return v.view(torch.int32 if v.dtype == torch.float32 else torch.int16)


def every_loop_case(test: Callable[..., None]) -> Callable[..., None]:
    """Parametrizes a loop-knob test over (reduction, op, dtype, n): every op and KL mode, dtype,
    size class and gradient kind (none: a full gradient; mean: the 0-d one autograd sends)."""
    for name, values, ids in (
        ("n", LOOP_SIZES, None),
        ("dtype", DTYPES, str),
        ("op", tuple(CALLS), None),
        ("reduction", ("none", "mean"), None),
    ):
        test = pytest.mark.parametrize(name, values, ids=ids)(test)
    return test


def cached(loops: _Loops) -> _Loops:
    """One build's loops (a cpu_loops.CpuKernels) given the compiled-loop cache, as the backend gives
    its own (kernels.backends.jit_cache): a rerun of the test loads what this one compiled. Not for
    a test that reads a loop's IR or assembly (cached code shows none)."""
    from kernels.backends import jit_cache

    for field in dataclasses.fields(loops):  # type: ignore[arg-type]
        value = getattr(loops, field.name)
        pairs = value.values() if isinstance(value, dict) else [value]
        jit_cache.attach(fn for pair in pairs for fn in pair)
    return loops
