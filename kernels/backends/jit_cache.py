"""An on-disk cache of the CPU backend's compiled loops, keyed by what the loops are made of.

Most of a fresh process's first launches is numba compiling the loops (a tuner study, a ``bench``
call, each asv benchmark process, each test file); the loops are the same from one process to
the next. numba's own ``cache=True`` cannot keep them: they are closures built by
``cpu_loops.make_cpu_kernels``, and numba keys a closure by pickling its cells, which hold
dispatchers and intrinsics that pickle a fresh uuid per process (every process would miss,
numba#6264); its key holds no jit option (a serial and a ``parallel=True`` build of one function
could serve each other, numba#6845); and its index file, one per function name, is rewritten by
each process that saves, so two processes saving variants of one closure at once can leave an
index entry naming the other's data file (the wrong loop, loaded without a word).

This cache keys each compiled signature by a token of everything numba freezes into the code:
the function's bytecode, its closure's cells and the module globals it names, recursively through
the jitted functions, Python functions and ``@overload`` implementations it reaches (whose
implementations may themselves be closures: cpu_loops' ``twin_tile``), the values of the
host-dependent switches among those globals (``RAW_FLAG``, ``HAS_BF16``, ...) as they are when
the signature compiles, the dispatcher's jit options, the source of every module of the
``kernels`` package, the numba, llvmlite and Python versions, and numba's target (CPU name and
features). A value the token cannot describe stably (an object of an unknown kind) leaves that
dispatcher uncached: it compiles as before. Each entry is a file of its own named by the key's
hash and holding the key, written to a temporary name and renamed into place, and read back
only where the key it holds is the one asked for: two processes saving at once each write
whole files of their own. A file that cannot be read is a miss.

Compiled code loaded from the cache cannot be inspected (numba returns no IR or assembly for
it and warns), so tuner.restamp's workers, which hash IR, run with the cache off, and the tests
that read a loop's assembly build loops of their own, with no cache attached.

Environment: ``LOSSTUNE_JIT_CACHE=0`` turns it off (read at each load and save);
``LOSSTUNE_JIT_CACHE_DIR`` says where it lives (default ``$XDG_CACHE_HOME/losstune/jit``, or
``~/.cache/losstune/jit``); ``LOSSTUNE_JIT_CACHE_DEBUG=1`` prints to stderr why a dispatcher was
left uncached and each load's and save's failure; ``LOSSTUNE_JIT_CACHE_MAX_MB`` caps its size
(default 1024 MiB). A kernel source change makes new keys, so old entries stop being read: a save
that takes the cache over its cap removes the least recently used entries (a load marks its entry
used) down to 80% of the cap, and ``losstune cache --prune`` / ``--clear`` do it by hand.

Built on numba's private caching hooks (``Dispatcher._cache``, ``CompileResult._reduce`` and
``_rebuild``, as numba's own FunctionCache uses them); where this numba lacks them, nothing is
cached.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import itertools
import os
import pickle
import secrets
import struct
import sys
import tempfile
import time
import types as pytypes
import warnings
from collections.abc import Callable, Iterable
from functools import cache
from pathlib import Path

import llvmlite
import numba
import numba.core.event
import numpy as np
from llvmlite import ir as ll_ir
from numba.core import types as nb_types
from numba.core.dispatcher import Dispatcher

ENABLE_ENV = "LOSSTUNE_JIT_CACHE"
DIR_ENV = "LOSSTUNE_JIT_CACHE_DIR"
DEBUG_ENV = "LOSSTUNE_JIT_CACHE_DEBUG"
MAX_ENV = "LOSSTUNE_JIT_CACHE_MAX_MB"
DEFAULT_MAX_MB = 1024  # a CI run writes ~60 MB; every edit under kernels/ starts a new set of keys
# A save that takes the cache over its cap prunes it to this share of the cap, so the saves after it
# do not each walk the directory again.
_PRUNE_TO = 0.8
_STALE_TMP_S = 3600.0  # a temp file older than this was left by a killed writer
FORMAT = "losstune-jit-cache 1"  # raise when an entry's layout changes: old entries then miss

# Libraries whose functions are described by name alone, covered by the versions above (numba's,
# llvmlite's) or fixed for the process (the rest). Every other function is followed into: its code,
# cells and globals, a test's lambdas included (two lambdas of one name differ in those).
_LIBRARIES = frozenset(
    ("numba", "llvmlite", "numpy", "math", "cmath", "operator", "builtins", "functools", "typing", "torch")
)


def _library(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in _LIBRARIES  # type: ignore[union-attr]


class Unstable(Exception):
    """A value the token cannot describe the same way in every process."""


def enabled() -> bool:
    """LOSSTUNE_JIT_CACHE: unset or 1 on, 0 off; any other value is refused by name (a typo such as
    "off" left it on without a word), by the project's one parser of 0/1 switches."""
    from kernels.backends.cpu_loops import _forced

    return _forced(ENABLE_ENV) is not False


def cache_dir() -> Path:
    """Where the entries live (read at each load and save, so a test can point it elsewhere)."""
    given = os.environ.get(DIR_ENV)
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "losstune" / "jit"


def max_bytes() -> int:
    """The cap on the cache's size, from LOSSTUNE_JIT_CACHE_MAX_MB (MiB; 0 keeps nothing)."""
    given = os.environ.get(MAX_ENV)
    if not given:
        return DEFAULT_MAX_MB * 2**20
    try:
        mib = int(given)
    except ValueError:
        mib = -1
    if mib < 0:
        raise ValueError(f"{MAX_ENV}: expected a whole number of MiB, 0 or more, got {given!r}")
    return mib * 2**20


def _debug(message: str) -> None:
    if os.environ.get(DEBUG_ENV) == "1":
        print(f"losstune jit cache: {message}", file=sys.stderr)


def _source_digest() -> str:
    """Every module of the kernels package, by path and content: what the loops are built from, in
    case a value the token follows by name alone changes with them."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


# Read when the backend imports this module, beside the loops, not at the first compile: a source
# edited while a process runs would otherwise key that process's (older) loops by the new source.
_SOURCE = _source_digest()


_registered: dict[int, list[object]] = {}  # id(func) -> its @overload implementations, as registered
_registered_upto = [0]  # how much of numba's append-only registry _registered has read


# The modules numba compiles the loops from, and every global of each as it was when the backend
# imported this module. numba keeps what it typed once (an @overload's implementation for a set of
# argument types, a callee it compiled) for the rest of the process; so once anything compiles while
# one of these globals is not what it was (a test's monkeypatch of cpu_loops.HAS_BF16), a later
# compile in this process may hold code of that value while the token reads the value restored.
# From that compile on, this process saves nothing (it still loads: a loaded entry is whole).
_COMPILED_FROM = (
    "kernels.backends.cpu_loops",
    "kernels.scalar",
    "kernels.ops.mse",
    "kernels.ops.l1",
    "kernels.ops.kl_div",
)
_AS_IMPORTED = {name: dict(vars(sys.modules[name])) for name in _COMPILED_FROM if name in sys.modules}
_tainted: list[str] = []  # the first global seen changed at a compile, once one was


def _changed() -> str | None:
    for name, was in _AS_IMPORTED.items():
        now = vars(sys.modules[name])
        for key, value in was.items():
            if now.get(key, _MISSING) is not value:
                return f"{name}.{key}"
    return None


_MISSING = object()


class _CompileWatch(numba.core.event.Listener):
    """At each compile in this process (cached loop or not), whether a watched global has changed."""

    def on_start(self, event: object) -> None:
        if not _tainted:
            changed = _changed()
            if changed is not None:
                _tainted.append(changed)
                _debug(f"{changed} changed since import and something compiled: this process saves nothing")

    def on_end(self, event: object) -> None:
        pass


# Whether this process's compiled names are its own and its compiles watched (below): set where the
# cache is on when the backend imports this module; attach gives no loop the cache without it.
_READY = enabled()
if _READY:
    numba.core.event.register("numba:compile", _CompileWatch())
    # numba names each compiled function by its qualname and a counter that starts at 1 in every
    # process, and a loop links the functions it calls through _apart under those names, as weak
    # symbols. A loaded loop's callee whose name a function compiled here already holds binds to that
    # one (numba#10486): two processes that compiled in the same order hand out the same names to
    # different closures (a loop of another formula, another twin), and the loaded loop would call
    # the wrong one. Counting from a random 62-bit start makes each process's names its own.
    # (tuner.restamp's workers, which compare IR by name, run with the cache off: not here.)
    from numba.core.bytecode import FunctionIdentity

    FunctionIdentity._unique_ids = itertools.count(secrets.randbits(62))


def _overload_impls(func: object) -> list[object]:
    """The implementation functions of every ``@overload(func)``: the code a call of ``func``
    compiles to, which ``func``'s own body (a stub) does not show."""
    from numba.core.typing.templates import builtin_registry

    entries = builtin_registry.globals
    for value, typ in entries[_registered_upto[0] :]:  # the registry keeps each value alive: ids hold
        if isinstance(typ, nb_types.Function):
            impls = [getattr(t, "_overload_func", None) for t in typ.templates]
            _registered.setdefault(id(value), []).extend(i for i in impls if i is not None)
    _registered_upto[0] = len(entries)
    return _registered.get(id(func), [])


def _names(code: pytypes.CodeType) -> set[str]:
    """Every global name ``code`` and the code objects nested in it may read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, pytypes.CodeType):
            names |= _names(const)
    return names


def _code_token(code: pytypes.CodeType) -> list[object]:
    consts = [_code_token(c) if isinstance(c, pytypes.CodeType) else repr(c) for c in code.co_consts]
    return [code.co_name, hashlib.sha256(code.co_code).hexdigest(), consts, list(code.co_names)]


class _Tokens:
    """The token of one value, following what it reaches; memoised by identity within one key."""

    def __init__(self) -> None:
        self._done: dict[int, object] = {}
        self._busy: set[int] = set()
        self._kept: list[object] = []  # holds what was memoised by id alive while the key is built

    def of(self, value: object) -> object:
        if isinstance(value, float):  # by its bits: repr gives every NaN one spelling
            return ["float", struct.pack("<d", value).hex()]
        if isinstance(value, complex):
            return ["complex", struct.pack("<dd", value.real, value.imag).hex()]
        if value is None or isinstance(value, (bool, int, str, bytes)):
            return [type(value).__name__, repr(value)]
        if isinstance(value, (tuple, list)):
            return [type(value).__name__, [self.of(v) for v in value]]
        key = id(value)
        if key in self._done:
            return self._done[key]
        if key in self._busy:  # a function that reaches itself: its name, once
            return ["cycle", getattr(value, "__qualname__", type(value).__name__)]
        self._busy.add(key)
        self._kept.append(value)
        try:
            token = self._describe(value)
        finally:
            self._busy.discard(key)
        self._done[key] = token
        return token

    def _describe(self, value: object) -> object:
        if isinstance(value, (frozenset, set)):
            return [type(value).__name__, sorted(repr(self.of(v)) for v in value)]
        if isinstance(value, dict):
            return ["dict", sorted((repr(self.of(k)), repr(self.of(v))) for k, v in value.items())]
        if isinstance(value, enum.Enum):
            return ["enum", type(value).__module__, type(value).__qualname__, value.name]
        if isinstance(value, np.dtype):
            return ["dtype", value.str]
        if isinstance(value, np.generic):
            return ["np", value.dtype.str, value.tobytes().hex()]
        if isinstance(value, np.ndarray):
            return ["ndarray", value.dtype.str, value.shape, hashlib.sha256(value.tobytes()).hexdigest()]
        if isinstance(value, nb_types.Type):
            return ["numba type", str(value)]
        if isinstance(value, ll_ir.Type):  # an LLVM type an intrinsic builds with (_I32): its spelling
            return ["llvm type", str(value)]
        if isinstance(value, pytypes.ModuleType):
            if _library(value.__name__):
                return ["module", value.__name__]
            # One of ours, read by attribute (``loops.RAW_FLAG``): its switches as they are now.
            switches = sorted(
                (k, repr(v)) for k, v in vars(value).items() if isinstance(v, (bool, int, float, str, type(None)))
            )
            return ["module", value.__name__, switches]
        if isinstance(value, type):
            return ["class", value.__module__, value.__qualname__]
        if isinstance(value, Dispatcher):
            options = sorted((k, repr(v)) for k, v in value.targetoptions.items())
            return ["dispatcher", type(value).__name__, options, self.of(value.py_func)]
        if isinstance(value, pytypes.FunctionType):
            return self._function(value)
        wrapped = getattr(value, "__wrapped__", None)  # functools.cache and the like: what they call
        if isinstance(wrapped, pytypes.FunctionType):
            return ["wrapper", type(value).__qualname__, self._function(wrapped)]
        if isinstance(value, pytypes.BuiltinFunctionType):
            return ["builtin", getattr(value, "__module__", None), value.__qualname__]
        defn = getattr(value, "_defn", None)  # numba's @intrinsic: its definition says what it emits
        if isinstance(defn, pytypes.FunctionType):
            return ["intrinsic", type(value).__name__, self._function(defn)]
        if dataclasses.is_dataclass(value) and type(value).__dataclass_params__.frozen:
            fields = [(f.name, self.of(getattr(value, f.name))) for f in dataclasses.fields(value)]
            return ["dataclass", type(value).__module__, type(value).__qualname__, fields]
        # A library's function under another type (a numpy ufunc, a numba typing function): by
        # name. An instance of any other kind (a partial, an object with state) cannot be told.
        name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        module = getattr(value, "__module__", None)
        if callable(value) and isinstance(name, str) and isinstance(module, str) and _library(module):
            return ["library", module, name]
        if isinstance(value, np.ufunc):
            return ["ufunc", value.__name__]
        raise Unstable(f"{type(value).__module__}.{type(value).__qualname__}")

    def _function(self, fn: pytypes.FunctionType) -> object:
        if _library(fn.__module__):
            return ["library", fn.__module__, fn.__qualname__]
        cells = [self.of(c.cell_contents) if _filled(c) else "empty" for c in fn.__closure__ or ()]
        scope = fn.__globals__
        named = sorted((n, self.of(scope[n])) for n in _names(fn.__code__) if n in scope)
        overloads = [self.of(impl) for impl in _overload_impls(fn)]
        defaults = [self.of(fn.__defaults__), self.of(fn.__kwdefaults__)]
        return ["function", fn.__module__, fn.__qualname__, _code_token(fn.__code__), cells, named, overloads, defaults]


def _filled(cell: pytypes.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def token(dispatcher: Dispatcher) -> str:
    """The hex digest describing ``dispatcher``'s code and everything it reaches; ``Unstable``
    where some value it reaches cannot be described the same way in another process."""
    described = _Tokens().of(dispatcher)
    versions = [FORMAT, numba.__version__, llvmlite.__version__, np.__version__, sys.version, _SOURCE, _config()]
    return hashlib.sha256(repr([versions, described]).encode()).hexdigest()


def _config() -> list[tuple[str, str]]:
    """numba's settings (NUMBA_OPT, NUMBA_BOUNDSCHECK, the vectorisers, ...), as they are now: the
    target's CPU and features are in numba's own magic tuple, the rest of what shapes code is here."""
    from numba.core import config

    return sorted(
        (k, repr(v))
        for k, v in vars(config).items()
        if k.isupper() and isinstance(v, (bool, int, float, str, type(None)))
    )


class ContentCache:
    """numba's per-dispatcher cache interface (what ``Dispatcher.compile`` calls on ``_cache``),
    over one file per (token, signature, target)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self._enabled = True
        # A miss's key, by signature, for the save that follows it in the same compile: the token
        # walks everything the loop reaches, once a compile is enough.
        self._missed: dict[str, str | None] = {}

    # numba's _Cache interface
    @property
    def cache_path(self) -> str:
        return str(cache_dir())

    def enable(self) -> None:
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def flush(self) -> None:
        pass

    def _key(self, sig: object, codegen: object) -> str | None:
        try:
            tok = token(self._dispatcher)
        except Unstable as why:
            _debug(f"{self._dispatcher.py_func.__qualname__} left uncached: it reaches a {why}")
            return None
        return repr((tok, str(sig), codegen.magic_tuple()))  # type: ignore[attr-defined]

    def _path(self, key: str) -> Path:
        digest = hashlib.sha256(key.encode()).hexdigest()
        return cache_dir() / digest[:2] / f"{digest}.nbc"

    def load_overload(self, sig: object, target_context: object) -> object:
        if not (self._enabled and enabled()):
            return None
        try:
            target_context.refresh()  # type: ignore[attr-defined]
            key = self._key(sig, target_context.codegen())  # type: ignore[attr-defined]
            self._missed[str(sig)] = key  # dropped below on a hit
            if key is None:
                return None
            path = self._path(key)
            if not path.exists():
                return None
            with path.open("rb") as f:
                stored_key, payload = pickle.load(f)
            if stored_key != key:
                _debug(f"{path} holds another key: a miss")
                return None
            from numba.core.compiler import CompileResult

            loaded = CompileResult._rebuild(target_context, *payload)
            del self._missed[str(sig)]
            _touch(path)
            return loaded
        except Exception as why:  # noqa: BLE001 - any failure to read an entry is a miss, never a wrong loop
            _debug(f"load of {self._dispatcher.py_func.__qualname__} failed ({why!r}): compiling")
            return None

    def save_overload(self, sig: object, cres: object) -> None:
        if not (self._enabled and enabled()):
            return
        try:
            if cres.lifted or cres.library.has_dynamic_globals:  # type: ignore[attr-defined]
                return  # numba's own FunctionCache declines these too (check_cachable)
            if _tainted:
                return
            missed = str(sig) in self._missed
            key = self._missed.pop(str(sig)) if missed else self._key(sig, cres.codegen)  # type: ignore[attr-defined]
            if key is None:
                return
            from numba.core.serialize import dumps

            data = dumps((key, cres._reduce()))  # type: ignore[attr-defined]
            path = self._path(key)
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".nbc")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            _saved(len(data))
        except Exception as why:  # noqa: BLE001 - a cache that cannot save only costs the next process a compile
            _debug(f"save of {self._dispatcher.py_func.__qualname__} failed ({why!r})")


def attach(dispatchers: Iterable[object]) -> int:
    """Give each numba dispatcher in ``dispatchers`` the content cache (once; those with one
    already keep it); the number newly given one. Nothing where the cache is off or this numba
    lacks the hooks."""
    if not (_READY and enabled() and _hooks_present()):
        return 0
    count = 0
    for fn in dispatchers:
        if isinstance(fn, Dispatcher) and not isinstance(getattr(fn, "_cache", None), ContentCache):
            fn._cache = ContentCache(fn)
            count += 1
    return count


@cache
def _hooks_present() -> bool:
    """Whether this numba has the hooks the cache uses, and its registry shows an ``@overload``'s
    implementation where _overload_impls looks (were it not to, two builds that differ in an
    overload's closure alone would share a key: then nothing is cached)."""
    from numba.core.compiler import CompileResult
    from numba.extending import overload

    rebuilds = all(hasattr(CompileResult, name) for name in ("_reduce", "_rebuild"))

    def probe() -> None:  # pragma: no cover - never called: an overload's key
        raise NotImplementedError

    def probe_impl() -> Callable[[], None]:
        return lambda: None

    overload(probe)(probe_impl)
    found = _overload_impls(probe) == [probe_impl]
    if not found:
        _debug("this numba's registry hides @overload implementations: nothing is cached")
    return rebuilds and hasattr(Dispatcher, "enable_caching") and found


def _touch(path: Path) -> None:
    """Mark a loaded entry as used now: pruning drops the least recently used first (by mtime, as
    atime is often not kept)."""
    try:
        os.utime(path)
    except OSError:
        pass  # a cache on a read-only mount still loads


# Bytes this process believes each cache directory holds, from its first save there (which walks the
# directory) on: each later save adds its own, other processes' go unseen until the next walk.
_held: dict[Path, int] = {}
_warned: list[bool] = []


def _saved(size: int) -> None:
    """After a save: prune when the cache has gone over its cap."""
    root = cache_dir()
    if root in _held:
        _held[root] += size
    else:
        _held[root] = sum(size for _, size, _ in _entries(root))
    try:
        cap = max_bytes()
    except ValueError as bad:
        if not _warned:
            _warned.append(True)
            warnings.warn(f"{bad}: the compiled-loop cache is not pruned", stacklevel=2)
        return
    if _held[root] > cap:
        del _held[root]  # the next save walks it again, whatever the prune managed
        prune(int(cap * _PRUNE_TO))


def _entries(root: Path) -> list[tuple[Path, int, float]]:
    """Each entry's path, bytes and last use; entries another process removes meanwhile are left out.
    Only the cache's own layout (``<2 hex>/<sha256>.nbc``, _path) one level down: a directory given
    by mistake loses nothing of its own deeper down to a prune or a clear."""
    found = []
    for path in root.glob("*/*.nbc") if root.is_dir() else ():
        if path.name.startswith(".tmp-"):
            continue
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        found.append((path, st.st_size, st.st_mtime))
    return found


class PruneError(OSError):
    """Entries a prune could not remove (a read-only cache, another owner's files); its message says
    what it did remove, the first it could not and what is left."""


def prune(limit: int | None = None) -> tuple[int, int]:
    """Remove the least recently used entries until the cache holds ``limit`` bytes at most (default:
    the cap), and temp files a killed writer left; the entries and bytes removed. Safe beside other
    processes: a loader whose entry goes is a miss, and compiles. Entries that cannot be removed are
    passed over (older ones after them go instead) and named in a PruneError at the end."""
    limit = max_bytes() if limit is None else limit
    if limit < 0:
        raise ValueError(f"limit: expected bytes, 0 or more, got {limit}")
    root = cache_dir()
    entries = sorted(_entries(root), key=lambda e: e[2])
    total = sum(size for _, size, _ in entries)
    removed = freed = 0
    failed: list[str] = []
    for path, size, _ in entries:
        if total <= limit:
            break
        try:
            path.unlink(missing_ok=True)
        except OSError as why:  # the rest are still tried: the next least recently used goes instead
            failed.append(f"{path}: {why.strerror or why}")
            continue
        total -= size
        removed += 1
        freed += size
    now = time.time()
    for tmp in root.glob("*/.tmp-*.nbc") if root.is_dir() else ():
        try:
            if now - tmp.stat().st_mtime > _STALE_TMP_S:
                tmp.unlink(missing_ok=True)
        except OSError:
            continue  # a temp file is its writer's, or the next prune's
    if failed:
        raise PruneError(
            f"{root}: removed {removed} entries ({freed / 2**20:.1f} MiB), {len(failed)} could not be "
            f"removed ({failed[0]}{', ...' if len(failed) > 1 else ''}); {total / 2**20:.1f} MiB left"
        )
    return removed, freed


def clear() -> tuple[int, int]:
    """Remove every entry; the entries and bytes removed."""
    return prune(0)


def usage() -> tuple[Path, int, int]:
    """The cache's directory, how many entries it holds and their bytes (``losstune doctor``)."""
    root = cache_dir()
    files = _entries(root)
    return root, len(files), sum(size for _, size, _ in files)


def cache_hits(dispatchers: Iterable[object]) -> int:
    """How many signatures of ``dispatchers`` were loaded from a cache (numba's own count)."""
    return sum(sum(getattr(fn, "_cache_hits", {}).values()) for fn in dispatchers)
