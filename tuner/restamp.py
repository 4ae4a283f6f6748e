"""Carry frozen CPU entries across kernel edits that leave their machine code as it was.

A frozen entry records the kernel hash of the source it was tuned on (frozen.kernel_hash: the
syntax trees of cpu_loops.py and the op's module), and any edit of those files makes every entry
stale, so one line added to the transposed walk used to cost every host's table and hours of
re-tuning that no single host can do (a session has one CPU, the tables are three). But a config's
ranking depends on the code it runs, not on the file it came from: where the edit leaves an
entry's loops compiling to the same LLVM IR, its measurements still hold.

``restamp`` checks exactly that, entry by entry. For a stale entry it finds the revision it was
tuned on (the git commit whose sources hash to the entry's kernel hash), launches the entry's
own config on a small problem of the entry's kind (op, dtype, gradient kind, layout) with that
revision's loops and op module and with the tree's, each in a fresh worker process, and compares
the optimised LLVM IR of every loop each launch compiled (numba's, after its O3 and the parallel
outlining), with names, string constants and comments taken out. Identical: the entry takes the current hash and
a ``restamped`` note (from which hash, at which commit, compiled for which CPU); different: it
stays stale, as before. The journal's study is updated to match, so a later ``freeze`` keeps it.

What it proves is bounded by the CPU compiled for: the IR compared is what that CPU's vector tier
and microarchitecture make of the code (they decide the module's feature gates and LLVM's
choices), so by default it restamps only the tables this host reads. ``target`` compiles for
another CPU instead, through numba's own cross-compilation switches (``NUMBA_CPU_NAME``,
``NUMBA_CPU_FEATURES``), which the loops' feature gates and the device name follow
(cpu_loops.target_features): an AVX-512 host can check the AVX2 tier's table for the CPU it was
tuned on. The proof is that the old and the new source give the same IR for that CPU and those
features. The probes run here (numba compiles a loop at its first call) where the target's
features are a subset of this host's; for any other target each call compiles and returns without
running, so an AVX2 host can check the AVX-512 tables too.

A stale entry's revision is found by either hash of its sources: the canonical one (the same
under every Python minor), or, for a table frozen before it, this Python's legacy one (of
``ast.dump``'s text); a restamped entry takes the canonical hash. ``migrate_hashes`` moves a whole
table, and its studies, from the legacy hash of given sources under a given Python to their
canonical hash, without compiling anything: the sources are the same, only the hash's text is not.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import linecache
import os
import platform
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from kernels import backends, frozen
from kernels.backends import cpu_loops
from kernels.executor import Executor, Formula
from kernels.modes import Op, Reduction, Variant
from kernels.tiling import Tiling
from tuner.freeze import _best_common, _merge_key, git_commit, table_lock, write_atomic
from tuner.problems import Case, InputLayout
from tuner.study import ROOT, journal_path, log, open_storage, restamped_final

if TYPE_CHECKING:
    import optuna

    from tuner.restamp_triton import TritonComparer

PROBE_NUMEL = 1 << 12  # a multiple of the 64 rows of the broadcast and transposed layouts
ATTEMPTS = 3  # compiles of each side before two IRs that never matched are called a change
# The tuner's source of each planner layout (tuner.problems.InputLayout), as in the shipped-table test.
_CASE_LAYOUT = {
    "contiguous": InputLayout.CONTIGUOUS,
    "strided": InputLayout.BROADCAST,
    "transposed": InputLayout.TRANSPOSED,
    "reduce": InputLayout.SUMMED,
}


# numba's cross-compilation switches: the CPU it compiles for and that CPU's features.
_TARGET_VARS = ("NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES")


@dataclass(frozen=True)
class Target:
    """A CPU to compile for instead of the host: LLVM's name for it and the features numba is told
    it has ("+avx2,+fma,-avx512f"), over LLVM's defaults for that name."""

    cpu: str
    features: str

    def env(self) -> dict[str, str]:
        return dict(zip(_TARGET_VARS, (self.cpu, self.features), strict=True))

    def flags(self) -> dict[str, bool]:
        """The features by name: on ("+") or off ("-"), parsed as numba's switch is."""
        from kernels.backends.cpu_loops import parse_features

        return parse_features(self.features)

    def impersonate(self) -> None:
        """Make llvmlite report this CPU as the host, in this (worker) process: an old revision's
        loops read their feature gates from llvmlite's host queries, not from numba's switches."""
        from llvmlite import binding as llvm
        from llvmlite.binding.targets import FeatureMap

        features = FeatureMap()
        features.update(self.flags())
        llvm.get_host_cpu_name = lambda: self.cpu
        llvm.get_host_cpu_features = lambda: FeatureMap(features)


# The features the loops' gates read (cpu_loops: avx512f, avx2 with fma, f16c, avx512bf16), for the
# CPUs the shipped tables were tuned on: the AVX2 tier's Zen 3, the AVX-512 tier's Zen 4 and Xeon,
# and the Zen 5 (its own table; the gates that single it out read the CPU's name, which numba's
# NUMBA_CPU_NAME sets: cpu_loops._CHECKED_CPUS, _RAW_FLAG_CPUS, _WALK_KNOB_CPUS). The lent Xeons
# report family 6 model 167, which LLVM names rocketlake, not sapphirerapids: its own table and its
# walk knobs (section 96) are that name's, so a host of another CPU restamps them through it.
_AVX512 = "+avx2,+fma,+f16c,+avx512f,+avx512bw,+avx512vl,+avx512dq,+avx512bf16"
TARGETS = {
    "znver3": Target("znver3", "+avx2,+fma,+f16c,-avx512f,-avx512bf16"),
    **{cpu: Target(cpu, _AVX512) for cpu in ("znver4", "sapphirerapids", "znver5", "rocketlake")},
}


def target(name: str) -> Target:
    """One of TARGETS by its CPU name. One whose features this host lacks is compiled for without
    running (see runs_here)."""
    if name not in TARGETS:
        raise ValueError(f"target: expected one of {', '.join(TARGETS)}, got {name!r}")
    return TARGETS[name]


def _missing_here(to: Target) -> list[str]:
    from llvmlite import binding as llvm

    host = llvm.get_host_cpu_features()
    return [name for name, on in to.flags().items() if on and not host.get(name, False)]


def runs_here(to: Target) -> bool:
    """Whether this host has every feature ``to`` names. A worker launches its probe problem to
    compile it (numba compiles a loop at its first call); for a target that does not run here
    (an AVX-512 table checked from an AVX2 host) the worker's loops compile at that call and are
    never run (_compile_only), so the IR compared is the same either way."""
    return not _missing_here(to)


def runnable_here(to: Target) -> Target:
    """``to`` where this host has every feature it names (so its loops can run here, as the tests
    that launch them need), else a ValueError that names the missing ones. Restamp itself does not
    need it: where the host lacks them it compiles without running (``_compile_only``)."""
    missing = _missing_here(to)
    if missing:
        raise ValueError(
            f"target: expected a CPU whose features this host has (to run its loops), got {to.cpu}"
            f" with {', '.join(missing)}, which this host lacks"
        )
    return to


class Verdict(str, Enum):
    CURRENT = "current"  # already the current kernel hash
    SAME = "same"  # tuned on other source, and its loops compile to the same IR: restamped
    CHANGED = "changed"  # its loops compile differently now: stays stale (re-tune it)
    NO_SOURCE = "no-source"  # no commit's sources hash to its kernel hash (a dirty tree, or history missing)
    NO_PROBE = "no-probe"  # its problem cannot be rebuilt here (another layout, an illegal config)


@dataclass(frozen=True)
class Sources:
    """One revision of the sources an entry's kernel hash covers: the loops and each op module."""

    label: str  # a commit, or "tree"
    loops: str
    ops: dict[str, str]

    def kernel_hash(self, op: str) -> str:
        """The canonical hash (the same under every Python minor): what a restamp writes."""
        return frozen.source_hash(self.loops, self.ops[op])

    def legacy_kernel_hash(self, op: str) -> str:
        """The legacy hash under this Python (kernels.codehash.legacy_source_hash)."""
        return frozen.legacy_source_hash(self.loops, self.ops[op])

    def hashes(self, op: str) -> tuple[str, str]:
        """Every hash an entry tuned on these sources may carry here: canonical, then legacy."""
        return self.kernel_hash(op), self.legacy_kernel_hash(op)


@dataclass(frozen=True)
class Outcome:
    where: str  # "entries[i]" or "common[name]"
    label: str
    verdict: Verdict
    detail: str = ""


_OPS = tuple(op.value for op in Op)
_PACKAGE = Path(frozen.__file__).parent


def _kernel_paths(backend: str = "cpu") -> dict[str, str]:
    """Each source a kernel hash of ``backend`` covers, by its path in the kernels package: the
    loops, then each op's module (frozen.kernel_files)."""
    loops = frozen.kernel_files(backend, _OPS[0])[0]
    return {"loops": loops, **{op: frozen.kernel_files(backend, op)[1] for op in _OPS}}


def _sources(label: str, read: Callable[[str], str], backend: str = "cpu") -> Sources:
    text = {name: read(path) for name, path in _kernel_paths(backend).items()}
    return Sources(label, text.pop("loops"), text)


def tree_sources(backend: str = "cpu") -> Sources:
    return _sources("tree", lambda path: (_PACKAGE / path).read_text(), backend)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def git_sources(commit: str, backend: str = "cpu") -> Sources | None:
    """The sources of ``backend``'s kernels at ``commit``; None where git or the commit is missing."""
    try:
        return _sources(commit, lambda path: _git("show", f"{commit}:kernels/{path}"), backend)
    except (OSError, subprocess.CalledProcessError):
        return None


class GitHistory:
    """Finds the revision whose sources hash to a kernel hash, canonical or this Python's legacy one
    (a table frozen before the canonical hash): the entry's own commit first (where it was frozen),
    then every commit that touched the kernel sources, newest first."""

    def __init__(self, depth: int = 400, backend: str = "cpu") -> None:
        self._depth = depth
        self._backend = backend
        self._by_commit: dict[str, Sources | None] = {}
        self._log: list[str] | None = None

    def _at(self, commit: str) -> Sources | None:
        if commit not in self._by_commit:
            self._by_commit[commit] = git_sources(commit, self._backend)
        return self._by_commit[commit]

    def __call__(self, op: str, wanted: str, hint: str) -> Sources | None:
        candidates = [hint] if hint and hint != "unknown" else []
        if self._log is None:
            try:
                paths = sorted({f"kernels/{path}" for path in _kernel_paths(self._backend).values()})
                self._log = _git("log", f"-{self._depth}", "--format=%H", "--", *paths).split()
            except (OSError, subprocess.CalledProcessError):
                self._log = []
        for commit in (*candidates, *self._log):
            found = self._at(commit)
            if found is not None and op in found.ops and wanted in found.hashes(op):
                return found
        return None


# ---- compiling one entry's loops from one revision --------------------------------------------------

_STRINGS = re.compile(r'\[\d+ x i8\] c"[^"]*"')
_META_STRINGS = re.compile(r'!"[^"]*"')
_COMMENTS = re.compile(r"\s*;.*$", re.M)
_HEADER = re.compile(r"^(; ModuleID|source_filename).*$", re.M)
_NAMES = re.compile(r'([@%])("[^"]*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)|^([-a-zA-Z$._][-a-zA-Z$._0-9]*):', re.M)


_DEFINE = re.compile(r"^(?=define\b)", re.M)
_TYPE_DEFS = re.compile(r'^(%(?:"[^"]*"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)) = type\b', re.M)


def normalize_ir(text: str) -> str:
    """LLVM IR with what differs between two loads of the same code taken out: every global, local
    and label name renamed in order of first appearance (numba's mangled names carry the module
    name and a counter, its block labels the parfor pass's numbering), string constants (the
    mangled names in error messages) and comments. Instructions, types, constants, attributes and
    the order of it all stay: any change in what the code does shows.

    Globals and named types are one name space for the module; locals and labels one per function,
    as LLVM scopes them. With one space for all, a function whose local happened to share its name
    with one of an earlier function took that one's number, so two loads of one walk compiled
    beside differently named code read as different (results/performance.md, section 36)."""
    text = _HEADER.sub("", text)
    text = _STRINGS.sub("[str]", text)
    text = _META_STRINGS.sub("!str", text)
    text = _COMMENTS.sub("", text)
    types = set(_TYPE_DEFS.findall(text))
    module: dict[str, str] = {}

    def renamer(local: dict[str, str]) -> Callable[[re.Match[str]], str]:
        def rename(m: re.Match[str]) -> str:
            if m.group(3) is not None:  # a label's definition: one name space with the locals
                return local.setdefault("%" + m.group(3), f"v{len(local)}") + ":"
            key = m.group(1) + m.group(2)
            names = local if m.group(1) == "%" and key not in types else module
            return m.group(1) + names.setdefault(key, f"{'v' if names is local else 'g'}{len(names)}")

        return rename

    return "".join(_NAMES.sub(renamer({}), piece) for piece in _DEFINE.split(text))


def _load(name: str, text: str) -> ModuleType:
    """``text`` run as the module ``name`` (a worker loads each of its two sources once), its lines
    registered where inspect finds them (triton.jit reads each kernel's source so)."""
    spec = importlib.util.spec_from_loader(name, loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    module.__file__ = f"<{name}>"
    linecache.cache[module.__file__] = (len(text), None, text.splitlines(keepends=True), module.__file__)
    sys.modules[name] = module
    try:
        # Our own files at one of our commits, as trusted as the tree's.
        exec(compile(text, module.__file__, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def probe_case(entry: dict[str, object], numel: int = PROBE_NUMEL) -> Case | None:
    """A problem of the entry's kind (op, logTarget, dtype, gradient kind, layout) at ``numel``;
    None where the tuner has no source of its layout."""
    layout = _CASE_LAYOUT.get(str(entry.get("layout", "")))
    if layout is None or entry.get("op") not in _OPS:
        return None
    red = Reduction.NONE if entry.get("reduction_kind") == "none" else Reduction.MEAN
    full = entry.get("grad_kind") == "full"
    if full != (red is Reduction.NONE):
        return None  # a full gradient with a reduction: autograd never sends it, the tuner never tunes it
    dtype = getattr(torch, str(entry.get("dtype")), None)
    if not isinstance(dtype, torch.dtype):
        return None
    return Case(Op(str(entry["op"])), dtype, (numel,), red, bool(entry.get("log_target")), layout)


def as_launched_today(loops: ModuleType) -> ModuleType:
    """An old revision's loops module, shaped as today's launch (kernels/backends/cpu.py) calls it.
    Before Tiling.transpose_row (and cpu_loops.TRANSPOSE_ROWS) the transposed walks were keyed by
    tile alone: they are the walks of the host's own rows, (tile, 0) now. Before
    cpu_loops.StridedRun one strided walk served every kind of innermost run: it is each kind's
    now. Before cpu_loops.transposed_run the deferred transposed walks were keyed by (tile, row):
    each served every kind of pass (a)'s runs. Before cpu_loops.reduce_run one reduce walk served
    every kind of lanes, and every geometry (there was no walk along the summed dims). A module of
    today's shape is returned as it is; an old one is copied, never changed."""
    rows, runs, kinds = hasattr(loops, "TRANSPOSE_ROWS"), hasattr(loops, "StridedRun"), hasattr(loops, "transposed_run")
    lanes = hasattr(loops, "reduce_run")
    if rows and runs and kinds and lanes:
        return loops
    make = loops.make_cpu_kernels

    def make_cpu_kernels(*args: object, **kwargs: object) -> object:
        kernels = make(*args, **kwargs)
        changes: dict[str, object] = {}
        if not rows:
            changes["transposed"] = {(tile, 0): walk for tile, walk in kernels.transposed.items()}
        if not runs:
            changes["strided"] = dict.fromkeys(cpu_loops.StridedRun, kernels.strided)
        if not kinds and hasattr(kernels, "transposed_deferred"):
            changes["transposed_deferred"] = {
                (*key, kind): walk for key, walk in kernels.transposed_deferred.items() for kind in cpu_loops.StridedRun
            }
        if not lanes:
            changes["reduce"] = dict.fromkeys(cpu_loops.StridedRun, kernels.reduce)
            changes["reduce_along"] = dict.fromkeys((False, True), kernels.reduce)
        # today's fields: one an old revision lacks stays None (a launch that needs it fails there)
        fields = {f.name: getattr(kernels, f.name, None) for f in dataclasses.fields(cpu_loops.CpuKernels)}
        return cpu_loops.CpuKernels(**{**fields, **changes})

    today = ModuleType(loops.__name__)
    vars(today).update(vars(loops))
    today.make_cpu_kernels = make_cpu_kernels  # type: ignore[attr-defined]
    if not rows:
        today.TRANSPOSE_ROWS = (0,)  # type: ignore[attr-defined]
    if not runs:
        today.StridedRun = cpu_loops.StridedRun  # type: ignore[attr-defined]
    if not kinds:
        today.transposed_run = cpu_loops.transposed_run  # type: ignore[attr-defined]
    if not lanes:
        today.reduce_run = cpu_loops.reduce_run  # type: ignore[attr-defined]
    return today


def compiled_ir(case: Case, config: Tiling, loops: ModuleType, formulas: dict[str, Formula]) -> dict[str, str]:
    """Launch ``config`` on ``case`` with the loops of ``loops`` and the formula of the same name in
    ``formulas``; the normalised IR of every (loop, signature) the launch compiled."""
    from kernels.backends.cpu import CpuBackend

    g, x, t = case.inputs("cpu")
    out = case.out_like(x)
    planned: Executor = case.phase_one(g, x, t, out, "cpu", config)
    ex = dataclasses.replace(planned, formula=formulas[planned.formula.name])
    backend = CpuBackend(as_launched_today(loops))
    backend.launch(ex)
    return {
        f"{name} {sig}": normalize_ir(fn.inspect_llvm(sig)) for name, fn in backend.built() for sig in fn.signatures
    }


# Each side compiles in a fresh interpreter of its own, with one hash seed, under one module name:
# numba names variables from process-wide counters and walks some sets of those names, so in one
# process the second compile of the same code names and orders things differently (the parallel
# loop's outlined function took its arguments in another order, its size checks ran in another).
# Two fresh processes doing the same steps hand out the same names. The compiled-loop cache
# (kernels.backends.jit_cache) is off there: code loaded from it shows no IR.
_WORKER_ENV = {"PYTHONHASHSEED": "0", "LOSSTUNE_JIT_CACHE": "0"}


def _compile_only() -> None:
    """Make every numba dispatcher call in this (worker) process compile for its arguments' types,
    as a first call does (numba's _compile_for_args), and return without running the code: a
    target's instructions may be ones this host lacks. The launch's outputs are never written;
    compiled_ir reads only what was compiled."""
    from numba.core import types as nb_types
    from numba.core.dispatcher import Dispatcher, OmittedArg

    def compile_only(self: Dispatcher, *args: object, **kwargs: object) -> None:
        if kwargs:
            raise TypeError(f"a probe launch passed keyword arguments to {self.py_func.__name__}: {sorted(kwargs)}")
        argtypes = tuple(nb_types.Omitted(a.value) if isinstance(a, OmittedArg) else self.typeof_pyval(a) for a in args)
        self.compile(argtypes)

    Dispatcher.__call__ = compile_only  # type: ignore[method-assign]


def _worker(spec: dict[str, object]) -> dict[str, str]:
    """One side's compile, in this (fresh) process: the spec's sources loaded under fixed names."""
    if spec.get("target"):
        Target(**spec["target"]).impersonate()  # type: ignore[arg-type]
    if spec.get("compile_only"):
        _compile_only()
    sources = spec["sources"]
    assert isinstance(sources, dict)
    loops = _load("kernels.backends._restamp_cpu_loops", str(sources["loops"]))
    op = str(spec["op"])
    module = _load(f"kernels.ops._restamp_{op}", str(sources["ops"][op]))  # type: ignore[index]
    case = probe_case(spec["entry"], int(spec["numel"]))  # type: ignore[arg-type]
    assert case is not None
    return compiled_ir(case, Tiling.from_dict(spec["config"]), loops, _formulas(module))  # type: ignore[arg-type]


@dataclass
class _Worker:
    proc: subprocess.Popen[str]
    spec: Path  # the spec file it reads (the sources run to tens of KB: a file, not a pipe it waits on)


def _worker_env(to: Target | None) -> dict[str, str]:
    env = {**os.environ, **_WORKER_ENV, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    for key in _TARGET_VARS:
        env.pop(key, None)  # the parent's own cross-compile settings never leak into a host compile
    return env | (to.env() if to else {})


def _spawn(spec: dict[str, object], to: Target | None = None) -> _Worker:
    fd, name = tempfile.mkstemp(prefix="losstune-restamp-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(spec, f)
    env = _worker_env(to)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tuner.restamp", name],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    return _Worker(proc, Path(name))


def _collect(worker: _Worker) -> dict[str, str]:
    try:
        out, err = worker.proc.communicate()  # both pipes at once: a chatty stderr cannot stall it
    finally:
        worker.spec.unlink(missing_ok=True)
    if worker.proc.returncode != 0:
        last = err.strip().splitlines()[-1] if err.strip() else f"exit {worker.proc.returncode}"
        raise RuntimeError(f"compile worker failed: {last}")
    return json.loads(out)


def _formulas(module: ModuleType) -> dict[str, Formula]:
    return {v.name: v for v in vars(module).values() if isinstance(v, Formula)}


class Comparer:
    """An old revision against the tree, one compile key at a time: entries that launch the same
    loops with the same argument types share one comparison (two worker processes, side by side)."""

    def __init__(self, tree: Sources, to: Target | None = None) -> None:
        self._tree = tree
        self._target = to
        self._cache: dict[tuple[object, ...], tuple[Verdict, str]] = {}

    @property
    def tree(self) -> Sources:
        return self._tree

    @property
    def target(self) -> Target | None:
        return self._target

    def compare(self, entry: dict[str, object], old: Sources) -> tuple[Verdict, str]:
        try:
            config = Tiling.from_dict(entry["config"])  # type: ignore[arg-type]
        except (KeyError, TypeError, ValueError) as e:
            return Verdict.NO_PROBE, f"bad config ({e})"
        numel = PROBE_NUMEL
        if config.variant is Variant.TABLE:
            from kernels.backends.cpu import TABLE_MIN_NUMEL

            numel = TABLE_MIN_NUMEL  # the table walk is legal from there on
        case = probe_case(entry, numel)
        if case is None:
            return Verdict.NO_PROBE, f"no tuner problem of layout {entry.get('layout')!r} and its gradient"
        tile = config.tile if case.layout is InputLayout.TRANSPOSED else 0
        key = (old.label, case.op, case.log_target, case.dtype, case.reduction, case.layout)
        key += (config.variant, config.cores > 1, tile)
        if key not in self._cache:
            self._cache[key] = self._compare(entry, numel, config, old)
        return self._cache[key]

    def _compare(self, entry: dict[str, object], numel: int, config: Tiling, old: Sources) -> tuple[Verdict, str]:
        """Up to ATTEMPTS compiles of each side: a loop matches where some compile of the tree and
        some compile of the old revision gave the same IR. Fresh processes are not always alike (a
        run over 66 entries of identical code once called 5 of its 30 compile pairs different, and
        the next run none; results/performance.md, section 33), but two different codes never
        compile to the same text, so a match is proof, and a miss after the attempts, or one that
        each side reproduced exactly, is a change."""
        op = str(entry["op"])
        probe = {"op": op, "entry": entry, "numel": numel, "config": config.to_dict()}
        probe["target"] = dataclasses.asdict(self._target) if self._target else None
        # A target this host cannot run is compiled for, not launched: the IR is what the first
        # call compiles either way. Both sides alike, so a match is still proof.
        probe["compile_only"] = self._target is not None and not runs_here(self._target)
        now: dict[str, set[str]] = {}
        then: dict[str, set[str]] = {}
        for attempt in range(1, ATTEMPTS + 1):
            workers = [
                _spawn(probe | {"sources": {"loops": side.loops, "ops": {op: side.ops[op]}}}, self._target)
                for side in (self._tree, old)
            ]
            try:
                new, before = (_collect(w) for w in workers)
            except RuntimeError as e:  # an old revision that no longer loads or plans here: not comparable
                return Verdict.NO_PROBE, str(e)
            finally:
                for w in workers:
                    if w.proc.poll() is None:
                        w.proc.kill()
                    w.spec.unlink(missing_ok=True)
            if not new:
                return Verdict.NO_PROBE, "the launch compiled no loop"
            if new.keys() != before.keys():
                return Verdict.CHANGED, f"other loops compiled: {sorted(new.keys() ^ before.keys())[:3]}"
            repeated = all(new[k] in now.get(k, ()) and before[k] in then.get(k, ()) for k in new)
            for k in new:
                now.setdefault(k, set()).add(new[k])
                then.setdefault(k, set()).add(before[k])
            differ = [k.split(" (")[0] for k in new if not now[k] & then[k]]
            if not differ:
                return Verdict.SAME, f"{len(new)} loop(s) compile the same" + (
                    f" ({attempt} tries)" if attempt > 1 else ""
                )
            if repeated:  # each side compiled as before, and the two still differ
                break
        return Verdict.CHANGED, "IR differs: " + ", ".join(differ)


def _entry_label(entry: dict[str, object]) -> str:
    log = "-log" if entry.get("log_target") else ""
    grad, layout = entry.get("grad_kind"), entry.get("layout")
    return f"{entry.get('op')}{log} {entry.get('dtype')} 2^{entry.get('bucket')} {grad} {layout}"


def host_tables(to: Target | None = None) -> tuple[str, ...]:
    """The CPU tables this host reads (its chip's, its tier's), or a host of CPU ``to`` would read
    (asked of a worker compiling for it): the ones a restamp can check."""
    return backends.get("cpu").facts().lookup_names if to is None else _target_tables(to)


@cache
def _target_tables(to: Target) -> tuple[str, ...]:
    """host_tables for a target: one worker start per target (the CLI and each table ask)."""
    code = "import json; from tuner.restamp import host_tables; print(json.dumps(host_tables()))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=_worker_env(to), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"target {to.cpu}: no device name ({done.stderr.strip().splitlines()[-1:]})")
    return tuple(json.loads(done.stdout))


def restamp_table(
    path: Path,
    *,
    dry_run: bool = False,
    storage: str | None = None,
    find_sources: Callable[[str, str, str], Sources | None] | None = None,
    tree: Sources | None = None,
    progress: Callable[[Outcome], None] | None = None,
    to: Target | None = None,
    comparer: Comparer | TritonComparer | None = None,
) -> list[Outcome]:
    """Check every stale entry of the CPU or CUDA table at ``path``; unless ``dry_run``, write the
    table with the SAME ones restamped (atomically; untouched where none is) and update their
    studies in ``storage`` (the journal by default) where the study's decision is that entry's.
    A CUDA table is compared by Triton's IR, compiled here for its GPU (tuner.restamp_triton).

    ``find_sources(op, kernel_hash, commit_hint)``: the revision an entry was tuned on (default:
    git history); ``tree``: the sources to compare against (default: the working tree); ``to``:
    the CPU to compile for (default: this host), whose tables the table must be one of;
    ``comparer``: one shared by the tables of one target, so an entry of the tier's table that
    launches what the chip's table launched takes that comparison's verdict (a compile pair costs
    seconds)."""
    backend = path.parent.name
    if backend == "cuda":
        from tuner.restamp_triton import ARCHS, TritonComparer

        if to is not None:
            raise ValueError(f"target: a CUDA table is compiled for its own GPU, got --target {to.cpu}")
        if path.stem not in ARCHS:
            known = ", ".join(sorted(ARCHS))
            raise ValueError(f"table: expected a CUDA table of a known GPU ({known}), got {path.stem}")
        arch = ARCHS[path.stem]
        chip = f"sm_{arch[0]}"
        current = tree or tree_sources("cuda")
        comparer = comparer or TritonComparer(current, arch)
    elif backend == "cpu":
        readable = host_tables(to)
        if path.stem not in readable:
            who = f"target {to.cpu}" if to else "this host"
            raise ValueError(
                f"table: {who} compiles for {', '.join(readable)} and can only restamp those tables;"
                f" got {path.stem} (run restamp on a host that reads it, or with --target its CPU)"
            )
        chip = readable[0]
        current = tree or tree_sources()
        comparer = comparer or Comparer(current, to)
    else:
        raise ValueError(f"table: expected a CPU or CUDA table (kernels/configs/{{cpu,cuda}}/<name>.json), got {path}")
    if comparer.tree is not current or comparer.target != to:
        raise ValueError("comparer: expected one of the same tree and target as this restamp")
    table = _read_table(path)
    # The journal opened before any compile: one it cannot read (or write) stops the restamp in
    # seconds, and before the table is written. A journal not there yet holds no study to update.
    journal = journal_path(storage)
    store = None if dry_run or (journal is not None and not journal.is_file()) else open_storage(storage)
    find = find_sources or GitHistory(backend=backend)
    outcomes: list[Outcome] = []
    entries: list[dict[str, object]] = table["entries"]
    restamped: list[dict[str, object]] = []
    for i, entry in enumerate(entries):
        op, old_hash = str(entry.get("op")), str(entry.get("kernel_hash"))
        now = current.kernel_hash(op) if op in current.ops else ""
        if op in current.ops and old_hash in current.hashes(op):  # legacy too (migrate_hashes rewrites those)
            outcome = Outcome(f"entries[{i}]", _entry_label(entry), Verdict.CURRENT)
        else:
            old = find(op, old_hash, str(entry.get("git_commit", "")))
            if old is None:
                outcome = Outcome(f"entries[{i}]", _entry_label(entry), Verdict.NO_SOURCE, f"kernel hash {old_hash}")
            else:
                verdict, detail = comparer.compare(entry, old)
                outcome = Outcome(f"entries[{i}]", _entry_label(entry), verdict, f"{old.label[:12]}: {detail}")
                if verdict is Verdict.SAME:
                    note = {"from": old_hash, "source": old.label, "commit": git_commit(), "compiled_for": chip}
                    entries[i] = entry | {"kernel_hash": now, "restamped": note}
                    restamped.append(entries[i])
        outcomes.append(outcome)
        if progress:
            progress(outcome)
    outcomes.extend(_common_outcomes(entries, current))
    if restamped and not dry_run:
        _write_restamped(path, restamped, store)
    return outcomes


def _write_restamped(
    path: Path, restamped: list[dict[str, object]], store: optuna.storages.BaseStorage | None = None
) -> list[dict[str, object]]:
    """The restamped entries into the table at ``path``, read again under its lock: the compares
    took seconds to minutes, and a freeze that wrote the table meanwhile keeps what it wrote (an
    entry it replaced is not this restamp's to change: a warning names it). Common configs are
    recomputed from the entries the way freeze does, so each takes the hash of its example entry:
    current where that entry was restamped, stale where not. Returns the entries written.

    Their studies in ``store`` are updated first: a restamp killed between the two then leaves a
    stale entry, which the next restamp finds and writes. The other order left the table current
    and the studies not, which no restamp saw again, and the next freeze wrote the stale hash back."""
    by_key = {_merge_key(e): e for e in restamped}
    written: list[dict[str, object]] = []
    with table_lock(path):
        table = _read_table(path)
        entries: list[dict[str, object]] = table["entries"]  # type: ignore[assignment]
        for i, entry in enumerate(entries):
            new = by_key.pop(_merge_key(entry), None)
            if new is None:
                continue
            note = new["restamped"]
            assert isinstance(note, dict)
            if entry.get("kernel_hash") == note["from"] and entry.get("config") == new["config"]:
                entries[i] = new
                written.append(new)
            else:
                by_key[_merge_key(entry)] = new
        for new in by_key.values():
            log.warning("%s: changed in %s while it was compared; not restamped", _entry_label(new), path)
        if written and store is not None:
            _update_studies(written, store)
        if written:
            table["common"] = _best_common(entries)
            write_atomic(path, table)
    frozen.reset()
    return written


def _read_table(path: Path) -> dict[str, object]:
    try:
        table = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"table: expected a readable JSON table at {path}, got {e}") from None
    if (
        not isinstance(table, dict)
        or table.get("schema_version") != frozen.SCHEMA_VERSION
        or not isinstance(table.get("entries"), list)
    ):
        raise ValueError(f"table: expected schema_version {frozen.SCHEMA_VERSION} with entries, got {path}")
    return table


def _common_outcomes(entries: list[dict[str, object]], current: Sources) -> list[Outcome]:
    found = []
    for name, common in sorted(_best_common(entries).items()):
        op = str(common.get("op"))
        current_now = op in current.ops and common.get("kernel_hash") in current.hashes(op)
        verdict = Verdict.CURRENT if current_now else Verdict.CHANGED
        found.append(Outcome(f"common[{name}]", name, verdict, "from its example entry"))
    return found


def _update_studies(entries: Iterable[dict[str, object]], store: optuna.storages.BaseStorage) -> None:
    """Each restamped entry's study, where its final decision is that entry's config and hash: the
    hash is updated there too, so a later freeze writes it again, and a resumed study still counts
    the trials measured on the old one (tuner.study.Sweep)."""
    import optuna

    names = {s.study_name for s in optuna.get_all_study_summaries(store, include_best_trial=False)}
    for entry in entries:
        name = str(entry.get("study"))
        if name not in names:
            continue
        study = optuna.load_study(study_name=name, storage=store)
        final = study.user_attrs.get("final")
        note = entry["restamped"]
        assert isinstance(note, dict)
        if (
            isinstance(final, dict)
            and final.get("kernel_hash") == note["from"]
            and final.get("config") == entry["config"]
        ):
            carried = restamped_final(final, str(entry["kernel_hash"]))  # its trials keep counting (Sweep)
            study.set_user_attr("final", carried | {"restamped": note})


# ---- moving a table from the legacy kernel hash to the canonical one --------------------------------

_CODEHASH = _PACKAGE / "codehash.py"


def hash_pairs(sources: Sources, python: str | None = None) -> dict[str, tuple[str, str]]:
    """Each op's (legacy, canonical) kernel hash of ``sources``, the legacy one as the interpreter
    ``python`` computes it (default: this one). kernels/codehash.py is standard library only and
    runs as a script there, isolated from this environment, so a bare interpreter of another minor
    will do; the canonical hashes it prints must be this process's (they are the same under every
    minor), or this raises."""
    return _hash_pairs(sources, python)[1]


def _hash_pairs(sources: Sources, python: str | None) -> tuple[str, dict[str, tuple[str, str]]]:
    """hash_pairs, and the version of the Python whose legacy hashes they are."""
    canonical = {op: sources.kernel_hash(op) for op in sources.ops}
    if python is None:
        return platform.python_version(), {op: (sources.legacy_kernel_hash(op), canonical[op]) for op in sources.ops}
    try:
        done = subprocess.run(
            [python, "-I", str(_CODEHASH)],
            input=json.dumps({"loops": sources.loops, "ops": sources.ops}),
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as e:
        raise ValueError(f"python: expected an interpreter, got {python} ({e})") from None
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        raise ValueError(f"python: expected an interpreter that runs {_CODEHASH.name}, got {python} ({last[0]})")
    try:
        found = json.loads(done.stdout)
        version, legacy = str(found["python"]), {op: str(found["legacy"][op]) for op in sources.ops}
        theirs = found["canonical"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        got = f"{done.stdout[:80]!r} ({e})"
        raise ValueError(f"python: expected {_CODEHASH.name}'s hashes from {python}, got {got}") from None
    if theirs != canonical:
        raise ValueError(
            f"python: {python} (Python {version}) hashes {sources.label} canonically as {theirs},"
            f" this Python as {canonical}: the canonical hash is not version-independent"
        )
    return version, {op: (legacy[op], canonical[op]) for op in sources.ops}


@dataclass(frozen=True)
class Migration:
    """What migrate_hashes did to one table and its studies (or would do, dry)."""

    path: Path
    python: str  # the version of the Python whose legacy hashes were mapped
    entries: int  # entries whose legacy hash took the canonical one
    common: int  # common configs likewise
    canonical: int  # entries and common configs that held the canonical hash already
    left: tuple[str, ...]  # entries and common configs of other sources (stale), left as they were
    studies: int  # studies whose final decision took the canonical hash

    def summary(self) -> str:
        return (
            f"{self.path}: {self.entries} entries and {self.common} common configs from Python {self.python}'s legacy"
            f" hash to the canonical one, {self.canonical} canonical already, {len(self.left)} left (other"
            f" sources), {self.studies} studies"
        )


def migrate_hashes(
    path: Path,
    sources: Sources | None = None,
    *,
    python: str | None = None,
    storage: str | None = None,
    dry_run: bool = False,
) -> Migration:
    """Give every entry and common config of the table at ``path`` that holds the legacy hash of
    ``sources`` (default: the working tree's, for the table's backend) under the interpreter
    ``python`` (default: this one; give the Python minor the table was frozen under) the canonical
    hash of the same sources, and do the same to the final decision of each of the table's
    backend's and device's studies in ``storage`` (the journal by default), so that a later
    ``freeze`` writes the same. Entries of any other hash (other sources: stale) are left as they
    are; no entry is made current that was not. The table is written atomically, and only where
    something changed; nothing is written before every hash is known (an error leaves it as it was).
    Running it again finds nothing to do."""
    with table_lock(path):  # read to write: a freeze beside it would lose its merge or this one's
        return _migrate_table(path, sources, python, storage, dry_run)


def _migrate_table(
    path: Path, sources: Sources | None, python: str | None, storage: str | None, dry_run: bool
) -> Migration:
    backend, device = path.parent.name, path.stem
    table = _read_table(path)
    current = sources or tree_sources(backend)
    version, pairs = _hash_pairs(current, python)
    entries: list[dict[str, object]] = table["entries"]  # type: ignore[assignment]
    common = table.get("common") if isinstance(table.get("common"), dict) else {}
    assert isinstance(common, dict)
    moved = {"entries": 0, "common": 0}
    canonical, left = 0, []
    for kind, items in (("entries", list(enumerate(entries))), ("common", list(common.items()))):
        for where, item in items:
            if not isinstance(item, dict):
                continue
            legacy, new = pairs.get(str(item.get("op")), ("", ""))
            if item.get("kernel_hash") == new:
                canonical += 1
            elif legacy and item.get("kernel_hash") == legacy:
                (entries if kind == "entries" else common)[where] = item | {"kernel_hash": new}
                moved[kind] += 1
            else:
                left.append(f"{kind}[{where}]" + (f" {_entry_label(item)}" if kind == "entries" else ""))
    studies = _migrate_studies(storage, backend, device, pairs, dry_run)
    if (moved["entries"] or moved["common"]) and not dry_run:
        table["entries"], table["common"] = entries, common
        write_atomic(path, table)
        frozen.reset()
    return Migration(path, version, moved["entries"], moved["common"], canonical, tuple(left), studies)


def _migrate_studies(
    storage: str | None, backend: str, device: str, pairs: dict[str, tuple[str, str]], dry_run: bool
) -> int:
    """The (backend, device) studies whose final decision holds an op's legacy hash: that op's
    canonical hash there (unless ``dry_run``). Returns how many."""
    import optuna

    store = open_storage(storage)
    moved = 0
    for summary in optuna.get_all_study_summaries(store, include_best_trial=False):
        attrs = summary.user_attrs
        final = attrs.get("final")
        if attrs.get("backend") != backend or attrs.get("device") != device or not isinstance(final, dict):
            continue
        legacy, new = pairs.get(str(attrs.get("op")), ("", ""))
        if not legacy or final.get("kernel_hash") != legacy:
            continue
        moved += 1
        if not dry_run:
            study = optuna.load_study(study_name=summary.study_name, storage=store)
            study.set_user_attr("final", final | {"kernel_hash": new})
    return moved


def format_outcomes(path: Path, outcomes: list[Outcome], dry_run: bool) -> str:
    counts = {v: sum(1 for o in outcomes if o.verdict is v) for v in Verdict}
    lines = [f"{path}: " + ", ".join(f"{n} {v.value}" for v, n in counts.items() if n)]
    lines += [f"  {o.verdict.value:9s} {o.label}  {o.detail}" for o in outcomes if o.verdict is not Verdict.CURRENT]
    if dry_run and counts[Verdict.SAME]:
        lines.append("  (dry run: nothing written)")
    return "\n".join(lines)


if __name__ == "__main__":  # a compile worker (Comparer): the spec file's path in argv, the IR as JSON on stdout
    json.dump(_worker(json.loads(Path(sys.argv[1]).read_text())), sys.stdout)
