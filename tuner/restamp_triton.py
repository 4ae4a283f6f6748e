"""Restamping CUDA tables: an entry tuned on older Triton sources whose launch compiles to the same
Triton IR today is carried over, as tuner.restamp does for the CPU with numba's LLVM IR.

Any edit of kernels/backends/triton_loops.py (or an op module) changes every CUDA entry's kernel
hash, and a stale entry falls back to the default config: without this a one-op edit would cost a
GPU session re-tuning every op. The check runs here, without a GPU: each side's ``launch`` is run
on a probe problem with its kernels replaced by recorders, and each recorded call is compiled by
Triton for the table's GPU target, as its first launch on the device would be specialised (pointer
dtypes, 16-byte alignment, integers that are 1 or multiples of 16, constexprs, num_warps). The IR
compared is TTIR, the kernel as Triton's frontend and its target-independent passes leave it,
without locations: what the sources decide. Two different kernels never compile to the same TTIR,
so SAME is proof; later stages depend on that TTIR and the compiler alone.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from kernels.backends import slug
from kernels.executor import Executor, Formula
from kernels.tiling import Tiling
from tuner.restamp import PROBE_NUMEL, Sources, Verdict, _load, probe_case
from tuner.study import ROOT

# GPU targets by table name (kernels/configs/cuda/<device>.json): (compute capability, warp size).
ARCHS = {slug("NVIDIA H200"): (90, 32), slug("NVIDIA H100 80GB HBM3"): (90, 32)}

_TYPES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32"}
_LOC = re.compile(r"\s*loc\((?:[^()]|\([^()]*\))*\)|^#loc.*$", re.MULTILINE)


def normalize_ttir(text: str) -> str:
    """TTIR without its source locations (line numbers move with every edit above a kernel)."""
    return "\n".join(line for line in _LOC.sub("", text).splitlines() if line.strip())


@dataclasses.dataclass(frozen=True)
class _Call:
    kernel: Any  # a triton JITFunction
    args: tuple[object, ...]
    kwargs: dict[str, object]


class _Recorder:
    """Stands in for a JITFunction: ``kernel[grid](...)`` records the call and launches nothing."""

    def __init__(self, kernel: Any, calls: list[_Call]) -> None:
        self._kernel, self._calls = kernel, calls

    def __getitem__(self, grid: object) -> Any:
        def record(*args: object, **kwargs: object) -> None:
            self._calls.append(_Call(self._kernel, args, kwargs))

        return record


def recorded_launch(loops: ModuleType, ex: Executor) -> list[_Call]:
    """The kernel calls ``loops.launch`` makes for ``ex`` as the CUDA backend calls it (the keyword
    options an older launch lacks are left out), none launched."""
    import inspect

    from triton.runtime.jit import JITFunction

    calls: list[_Call] = []
    patched = {k: v for k, v in vars(loops).items() if isinstance(v, JITFunction)}
    try:
        for name, kernel in patched.items():
            setattr(loops, name, _Recorder(kernel, calls))
        options = {"tiles_2d": True, "approx_exp2": True, "rne_cast": True}
        accepted = inspect.signature(loops.launch).parameters
        kwargs = {k: v for k, v in options.items() if k in accepted}
        loops.launch(ex, extra={"num_warps": ex.config.num_warps}, **kwargs)
    finally:
        for name, kernel in patched.items():
            setattr(loops, name, kernel)
    return calls


_Attrs = dict[tuple[int, ...], list[list[object]]]


def _specialise(call: _Call) -> tuple[dict[str, str], dict[str, object], _Attrs, int]:
    """(signature, constexprs, attrs, num_warps) of one recorded call, as Triton's launcher
    specialises it: tensors by dtype and 16-byte alignment, integers of 1 as constexprs and
    multiples of 16 as divisible, Python floats as fp32."""
    names = list(call.kernel.arg_names)
    values = dict(zip(names, call.args, strict=False))
    values.update({k: v for k, v in call.kwargs.items() if k in names})
    signature: dict[str, str] = {}
    constexprs: dict[str, object] = {}
    attrs: _Attrs = {}
    for i, (name, param) in enumerate(zip(names, call.kernel.params, strict=True)):
        value = values[name]
        if param.is_constexpr or (isinstance(value, int) and not isinstance(value, bool) and value == 1):
            signature[name], constexprs[name] = "constexpr", value
        elif isinstance(value, torch.Tensor):
            signature[name] = "*" + _TYPES[value.dtype]
            if value.data_ptr() % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, bool):
            signature[name] = "i1"
        elif isinstance(value, int):
            signature[name] = "i32" if -(2**31) <= value < 2**31 else "i64"
            if value % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        else:
            raise TypeError(f"a probe launch passed {name}={value!r} to {call.kernel.__name__}")
    return signature, constexprs, attrs, int(call.kwargs.get("num_warps", 4))


def compile_ttir(call: _Call, arch: tuple[int, int]) -> str:
    """The normalised TTIR of one recorded call, compiled for the NVIDIA target ``arch``."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs, attrs, warps = _specialise(call)
    src = ASTSource(fn=call.kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", *arch), options={"num_warps": warps})
    return normalize_ttir(compiled.asm["ttir"])


def launch_ttir(entry: dict[str, object], sources: Sources, arch: tuple[int, int], label: str) -> dict[str, str]:
    """Each kernel the entry's config launches with ``sources``, by kernel name: its TTIR."""
    case = probe_case(entry, PROBE_NUMEL)
    assert case is not None
    op = str(entry["op"])
    g, x, t = case.inputs("cpu")
    planned: Executor = case.phase_one(g, x, t, case.out_like(x), "cpu")  # the geometry: any backend plans it alike
    loops = _load(f"kernels.backends._restamp_triton_loops_{label}", sources.loops)
    module = _load(f"kernels.ops._restamp_triton_{op}_{label}", sources.ops[op])
    formulas = {v.name: v for v in vars(module).values() if isinstance(v, Formula)}
    config = Tiling.from_dict(entry["config"])  # type: ignore[arg-type]
    ex = dataclasses.replace(planned, config=config, formula=formulas[planned.formula.name])
    return {call.kernel.__name__: compile_ttir(call, arch) for call in recorded_launch(loops, ex)}


# Each comparison compiles in a fresh interpreter without TRITON_INTERPRET: in a process that loaded
# the triton-interpret backend (the test suite, a notebook) triton.jit and Triton's own library
# functions (tl.cdiv) are interpreted ones, which its compiler cannot compile.
def _worker(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    entry, arch = spec["entry"], tuple(spec["arch"])
    sides = {label: Sources(label, side["loops"], side["ops"]) for label, side in spec["sides"].items()}
    print(json.dumps({label: launch_ttir(entry, side, arch, label) for label, side in sides.items()}))


def _compile_pair(
    entry: dict[str, object], tree: Sources, old: Sources, arch: tuple[int, int]
) -> dict[str, dict[str, str]]:
    op = str(entry["op"])
    sides = {label: {"loops": src.loops, "ops": {op: src.ops[op]}} for label, src in (("tree", tree), ("old", old))}
    fd, name = tempfile.mkstemp(prefix="losstune-restamp-triton-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump({"entry": entry, "arch": list(arch), "sides": sides}, f)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tuner.restamp_triton", name], cwd=ROOT, env=env, capture_output=True, text=True
        )
    finally:
        Path(name).unlink(missing_ok=True)
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
        raise RuntimeError(f"compile worker failed: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


class TritonComparer:
    """An old revision against the tree for CUDA entries, one compile key at a time: entries of the
    same problem kind and config share one comparison. The whole config is in the key: its cores
    are the kernels' ``programs`` argument, which Triton specialises (1, multiples of 16)."""

    def __init__(self, tree: Sources, arch: tuple[int, int]) -> None:
        self._tree, self._arch = tree, arch
        self._cache: dict[tuple[object, ...], tuple[Verdict, str]] = {}

    @property
    def tree(self) -> Sources:
        return self._tree

    @property
    def target(self) -> None:
        """No CPU target: a CUDA table is compiled for its own GPU (restamp_table checks alike)."""
        return None

    def compare(self, entry: dict[str, object], old: Sources) -> tuple[Verdict, str]:
        try:
            config = Tiling.from_dict(entry["config"])  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError) as e:
            return Verdict.NO_PROBE, f"bad config ({e})"
        if probe_case(entry, PROBE_NUMEL) is None:
            return Verdict.NO_PROBE, f"no tuner problem of layout {entry.get('layout')!r} and its gradient"
        key = (old.label, entry.get("op"), entry.get("log_target"), entry.get("dtype"), entry.get("grad_kind"))
        key += (entry.get("layout"), config)
        if key not in self._cache:
            self._cache[key] = self._compare(entry, old)
        return self._cache[key]

    def _compare(self, entry: dict[str, object], old: Sources) -> tuple[Verdict, str]:
        try:
            compiled = _compile_pair(entry, self._tree, old, self._arch)
        except RuntimeError as e:  # an old revision that no longer loads, plans or compiles here
            return Verdict.NO_PROBE, str(e)
        now, before = compiled["tree"], compiled["old"]
        if not now:
            return Verdict.NO_PROBE, "the launch compiled no kernel"
        if now.keys() != before.keys():
            return Verdict.CHANGED, f"other kernels launched: {sorted(now.keys() ^ before.keys())}"
        differ = [name for name in now if now[name] != before[name]]
        if differ:
            return Verdict.CHANGED, "TTIR differs: " + ", ".join(differ)
        return Verdict.SAME, f"{len(now)} kernel(s) compile to the same TTIR"


if __name__ == "__main__":
    _worker(sys.argv[1])
