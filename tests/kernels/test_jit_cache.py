"""The compiled-loop cache (kernels.backends.jit_cache): a second process loads the loops a first one
compiled, bit for bit; the key tells apart everything a loop is built from; an entry is loaded
only under the key it was saved with; the cache off (or a value it cannot describe) compiles."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from numba import njit
from numba.extending import overload

from kernels.backends import cpu_loops, jit_cache
from kernels.ops import kl_div, mse
from tests.helpers import run_fresh

_STEP = np.float32(1.0)  # read by _step when a loop that inlines it compiles


@njit(inline="always")
def _step(v):
    return v + _STEP


def _adder(k: float, parallel: bool = False):  # noqa: ANN202 - a numba dispatcher
    def add(a, out):
        for i in range(a.shape[0]):
            out[i] = _step(a[i]) + k

    return njit(parallel=True)(add) if parallel else njit(add)


def _overloaded(k: float):  # noqa: ANN202 - a numba dispatcher
    """A loop whose one call is a stub resolved by an @overload built here: k is in the overload's
    closure alone, not the loop's."""

    def stub(v):  # pragma: no cover - the overload below, in numba
        raise NotImplementedError

    @overload(stub, inline="always")
    def impl(v):
        return lambda v: v * k

    def scale(a, out):
        for i in range(a.shape[0]):
            out[i] = stub(a[i])

    return njit(scale)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of this test's own, in a process that saves: an earlier test file in this worker
    may have compiled under a monkeypatched cpu_loops global, which ends a process's saves (tested in a
    fresh process below); the loops these tests compile read none of those globals."""
    monkeypatch.setenv(jit_cache.DIR_ENV, str(tmp_path))
    monkeypatch.delenv(jit_cache.ENABLE_ENV, raising=False)
    monkeypatch.setattr(jit_cache, "_tainted", [])
    monkeypatch.setattr(jit_cache, "_held", {})  # this process's tallies of caches' bytes
    monkeypatch.delenv(jit_cache.MAX_ENV, raising=False)
    return tmp_path


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.nbc") if not p.name.startswith(".tmp-"))


def _run(fn, a: np.ndarray) -> np.ndarray:  # noqa: ANN001 - a numba dispatcher
    out = np.empty_like(a)
    fn(a, out)
    return out


A = np.arange(8, dtype=np.float32)


def test_a_second_process_loads_the_loops_the_first_compiled_with_the_same_bits(tmp_path: Path) -> None:
    """Through the public calls on the CPU backend, each in a fresh interpreter sharing one cache:
    the first compiles every loop it launches and saves them; the second compiles none, loading
    each; both give the bits a third, with the cache off, compiles for itself."""
    code = (
        "import hashlib, torch, kernels\n"
        "from kernels.backends import cpu\n"
        "torch.manual_seed(0)\n"
        "outs = []\n"
        "for dt in (torch.float32, torch.bfloat16):\n"
        "    g, x, t = (torch.randn(4096).to(dt) for _ in range(3))\n"
        "    outs.append(kernels.mse_loss_backward(g, x, t, 'none', backend='cpu'))\n"
        "    outs.append(kernels.kl_div_backward(torch.tensor(0.5).to(dt), x, t, 'sum', True, backend='cpu'))\n"
        "    outs.append(kernels.l1_loss_backward(g.view(64, 64), x.view(64, 64).t(), t.view(64, 64), 'none',\n"
        "                                         backend='cpu'))\n"
        "fns = [fn for _, fn in cpu.BACKEND.built()]\n"
        "hits = sum(sum(fn._cache_hits.values()) for fn in fns)\n"
        "misses = sum(sum(fn._cache_misses.values()) for fn in fns)\n"
        "bits = b''.join(o.contiguous().view(torch.uint8).numpy().tobytes() for o in outs)\n"
        "print(hits, misses, hashlib.sha256(bits).hexdigest())\n"
    )
    env = {jit_cache.DIR_ENV: str(tmp_path), jit_cache.ENABLE_ENV: "1"}
    hits, misses, first = run_fresh(code, env).split()
    assert (int(hits), int(misses) > 0) == (0, True), (hits, misses)
    saved = _entries(tmp_path)
    assert len(saved) == int(misses), (len(saved), misses)  # one entry per compiled signature
    hits, misses, second = run_fresh(code, env).split()
    assert (int(hits), int(misses)) == (len(saved), 0)
    _, _, uncached = run_fresh(code, {**env, jit_cache.ENABLE_ENV: "0"}).split()
    assert first == second == uncached
    assert _entries(tmp_path) == saved  # a hit writes nothing


def test_a_new_build_of_the_same_loop_loads_it(cache: Path) -> None:
    first = _adder(2.0)
    assert jit_cache.attach([first]) == 1 and jit_cache.attach([first]) == 0  # once per dispatcher
    assert _run(first, A).tolist() == (A + 3).tolist()
    assert len(_entries(cache)) == 1
    again = _adder(2.0)
    jit_cache.attach([again])
    assert _run(again, A).tolist() == (A + 3).tolist()
    assert jit_cache.cache_hits([again]) == 1 and jit_cache.cache_hits([first]) == 0


def _fake_entries(root: Path, count: int, mib: float = 1.0) -> list[Path]:
    """Files laid out as entries, last used long ago, the first most recently."""
    made = []
    for i in range(count):
        path = root / "ff" / f"old{i}.nbc"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\0" * int(mib * 2**20))
        os.utime(path, (0, 1e9 - i * 60))
        made.append(path)
    return made


def test_a_load_marks_its_entry_used(cache: Path) -> None:
    first = _adder(4.0)
    jit_cache.attach([first])
    _run(first, A)
    (path,) = _entries(cache)
    os.utime(path, (0, 1e9))
    again = _adder(4.0)
    jit_cache.attach([again])
    assert _run(again, A).tolist() == (A + 5).tolist() and jit_cache.cache_hits([again]) == 1
    assert path.stat().st_mtime > time.time() - 600


def test_a_save_over_the_cap_removes_the_least_recently_used_down_to_most_of_it(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cap 2 MiB, three 1 MiB entries held: the save of a real loop takes the cache over it, and the
    two least recently used go (down to 80% of the cap), the loop just saved and the newest kept; a
    killed writer's old temp file goes with them, a live writer's stays."""
    newest, middle, oldest = _fake_entries(cache, 3)
    stale, live = cache / "ff" / ".tmp-stale.nbc", cache / "ff" / ".tmp-live.nbc"
    stale.write_bytes(b"x")
    live.write_bytes(b"x")
    os.utime(stale, (0, time.time() - 2 * 3600))
    monkeypatch.setenv(jit_cache.MAX_ENV, "2")
    fn = _adder(5.0)
    jit_cache.attach([fn])
    assert _run(fn, A).tolist() == (A + 6).tolist()
    kept = set(_entries(cache))
    assert newest in kept and middle not in kept and oldest not in kept and len(kept) == 2
    assert live.exists() and not stale.exists()
    again = _adder(5.0)  # the loop's own entry survived the prune its save caused
    jit_cache.attach([again])
    assert _run(again, A).tolist() == (A + 6).tolist() and jit_cache.cache_hits([again]) == 1


def test_a_bad_cap_warns_and_still_saves(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(jit_cache.MAX_ENV, "1.5")
    monkeypatch.setattr(jit_cache, "_warned", [])
    (old,) = _fake_entries(cache, 1)
    fn = _adder(6.0)
    jit_cache.attach([fn])
    with pytest.warns(
        UserWarning, match=r"LOSSTUNE_JIT_CACHE_MAX_MB: expected a whole number of MiB, 0 or more, got '1.5'"
    ):
        _run(fn, A)
    assert len(_entries(cache)) == 2 and old.exists()
    with pytest.raises(ValueError, match="limit: expected bytes, 0 or more, got -1"):
        jit_cache.prune(-1)


def test_the_key_tells_apart_cells_options_globals_and_overload_closures(monkeypatch: pytest.MonkeyPatch) -> None:
    base = jit_cache.token(_adder(2.0))
    assert jit_cache.token(_adder(2.0)) == base  # a new closure of the same cells: the same key
    assert jit_cache.token(_adder(3.0)) != base  # a cell
    assert jit_cache.token(_adder(2.0, parallel=True)) != base  # a jit option (numba#6845)
    monkeypatch.setattr(__import__(__name__, fromlist=["_STEP"]), "_STEP", np.float32(5.0))
    assert jit_cache.token(_adder(2.0)) != base  # a global a function it inlines reads
    monkeypatch.undo()
    assert jit_cache.token(_adder(2.0)) == base
    # k is in the overload's closure only: the loop's own code and cells are the same.
    assert jit_cache.token(_overloaded(2.0)) == jit_cache.token(_overloaded(2.0))
    assert jit_cache.token(_overloaded(2.0)) != jit_cache.token(_overloaded(3.0))
    # Two lambdas of one name and module that differ in code alone.
    assert jit_cache.token(njit(lambda a: a + 1)) != jit_cache.token(njit(lambda a: a - 1))


def test_the_key_tells_apart_the_cpu_loops_builds() -> None:
    """The real loops: their two builds, the 0-d gradient's, another formula's, a switch of the
    loops module (the AVX512-BF16 stores) read when they are built."""
    loops = cpu_loops.make_cpu_kernels(kl_div.FORMULA_LOG.narrow_value, True, kl_div.FORMULA_LOG.narrow_checked_value)
    same = cpu_loops.make_cpu_kernels(kl_div.FORMULA_LOG.narrow_value, True, kl_div.FORMULA_LOG.narrow_checked_value)
    other = cpu_loops.make_cpu_kernels(kl_div.FORMULA_LOG.value, True, kl_div.FORMULA_LOG.checked_value)
    plain = cpu_loops.make_cpu_kernels(mse.FORMULA.value)
    tokens = [jit_cache.token(fn) for fn in (*loops.flat, *loops.scalar_grad, other.flat[0], plain.flat[0])]
    assert len(set(tokens)) == len(tokens), tokens
    assert [jit_cache.token(fn) for fn in same.flat] == tokens[:2]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cpu_loops, "HAS_BF16", not cpu_loops.HAS_BF16)
        flipped = cpu_loops.make_cpu_kernels(
            kl_div.FORMULA_LOG.narrow_value, True, kl_div.FORMULA_LOG.narrow_checked_value, apart=True
        )
    kept = cpu_loops.make_cpu_kernels(
        kl_div.FORMULA_LOG.narrow_value, True, kl_div.FORMULA_LOG.narrow_checked_value, apart=True
    )
    assert jit_cache.token(flipped.flat[0]) != jit_cache.token(kept.flat[0])


def test_an_entry_is_loaded_only_under_its_own_key(cache: Path) -> None:
    """Another loop's entry in this key's file (as two writers of numba's shared index could leave
    it) is a miss: each loop compiles, and adds its own k."""
    two, three = _adder(2.0), _adder(3.0)
    jit_cache.attach([two, three])
    _run(two, A)
    _run(three, A)
    first, second = _entries(cache)
    a, b = first.read_bytes(), second.read_bytes()
    first.write_bytes(b)  # each file now holds the other loop's key and code
    second.write_bytes(a)
    fresh_two, fresh_three = _adder(2.0), _adder(3.0)
    jit_cache.attach([fresh_two, fresh_three])
    assert _run(fresh_two, A).tolist() == (A + 3).tolist()
    assert _run(fresh_three, A).tolist() == (A + 4).tolist()
    assert jit_cache.cache_hits([fresh_two, fresh_three]) == 0
    last_two, last_three = _adder(2.0), _adder(3.0)  # each written again under its own key: loaded
    jit_cache.attach([last_two, last_three])
    assert _run(last_two, A).tolist() == (A + 3).tolist()
    assert _run(last_three, A).tolist() == (A + 4).tolist()
    assert jit_cache.cache_hits([last_two, last_three]) == 2


def test_an_unreadable_entry_is_a_miss_and_is_written_again(cache: Path) -> None:
    first = _adder(7.0)
    jit_cache.attach([first])
    _run(first, A)
    (path,) = _entries(cache)
    path.write_bytes(path.read_bytes()[:-100])
    again = _adder(7.0)
    jit_cache.attach([again])
    assert _run(again, A).tolist() == (A + 8).tolist() and jit_cache.cache_hits([again]) == 0
    third = _adder(7.0)  # the miss wrote the entry again, whole: a third build loads it
    jit_cache.attach([third])
    assert _run(third, A).tolist() == (A + 8).tolist() and jit_cache.cache_hits([third]) == 1


def test_off_or_undescribable_compiles_and_saves_nothing(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fabs = ctypes.CDLL(ctypes.util.find_library("m")).fabs  # a ctypes function: no stable description
    fabs.restype, fabs.argtypes = ctypes.c_double, [ctypes.c_double]

    def absolute(a, out):
        for i in range(a.shape[0]):
            out[i] = fabs(a[i])

    with pytest.raises(jit_cache.Unstable, match="ctypes"):
        jit_cache.token(njit(absolute))
    odd = njit(absolute)
    assert jit_cache.attach([odd]) == 1
    assert _run(odd, -A).tolist() == A.tolist()  # compiled, and left uncached
    monkeypatch.setenv(jit_cache.ENABLE_ENV, "0")
    assert jit_cache.attach([njit(absolute)]) == 0  # off: nothing attached
    uncached = _adder(11.0)
    monkeypatch.delenv(jit_cache.ENABLE_ENV)
    jit_cache.attach([uncached])
    monkeypatch.setenv(jit_cache.ENABLE_ENV, "0")  # read at each load and save too
    assert _run(uncached, A).tolist() == (A + 12).tolist()
    assert _entries(cache) == []


def test_the_restamp_workers_run_with_the_cache_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plumbing only: tuner.restamp hashes the IR its workers compile, and cached code shows none."""
    from tuner import restamp

    monkeypatch.setenv(jit_cache.ENABLE_ENV, "1")
    assert restamp._worker_env(None)[jit_cache.ENABLE_ENV] == "0"


def test_a_numba_whose_registry_hides_overloads_caches_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plumbing (the registry's reading replaced): were this numba to keep @overload implementations
    where the token does not look, two builds that differ in an overload's closure alone would share
    a key, so nothing is attached."""
    assert jit_cache._hooks_present.__wrapped__()
    monkeypatch.setattr(jit_cache, "_overload_impls", lambda func: [])
    monkeypatch.setattr(jit_cache, "_hooks_present", jit_cache._hooks_present.__wrapped__)
    assert not jit_cache._hooks_present()
    assert jit_cache.attach([_adder(1.0)]) == 0


_APART_LOOP = """
import os, numpy as np
from numba import njit
from kernels.backends import jit_cache
from kernels.backends.cpu_loops import _apart

def build(k):
    @njit(nogil=True)
    def inner(a, i):
        return a[i] * k

    def outer(a):
        s = 0.0
        for i in range(a.shape[0]):
            s += _apart(inner, (a, i))
        return s

    fn = njit(outer)
    jit_cache.attach([fn])
    return fn

a = np.arange(4.0)
print(" ".join(str(build(float(k))(a)) for k in os.environ["KS"].split()))
"""


def test_a_loaded_loop_calls_its_own_callee_not_one_compiled_here(tmp_path: Path) -> None:
    """A loop links what it calls through _apart under numba's names for them, which count from 1 in
    every process: the second process compiles the k=2 loop first, in the steps the first took for
    k=1, then loads k=1's. With those names shared, the loaded loop called the k=2 callee compiled
    here (numba#10486: 12.0 where 6.0 was due); each process's names are its own."""
    env = {jit_cache.DIR_ENV: str(tmp_path), jit_cache.ENABLE_ENV: "1"}
    assert run_fresh(_APART_LOOP, {**env, "KS": "1"}) == "6.0"
    assert len(_entries(tmp_path)) == 1
    assert run_fresh(_APART_LOOP, {**env, "KS": "2 1"}) == "12.0 6.0"


def test_a_compile_under_a_changed_loops_global_ends_this_processs_saves(tmp_path: Path) -> None:
    """numba keeps what it typed for the rest of the process, so a loop compiled after a switch of
    cpu_loops was changed and put back may hold the changed one's code under the restored key: after
    such a compile, nothing more is saved (loads go on)."""
    code = (
        "import numpy as np\n"
        "from kernels.backends import cpu_loops, jit_cache\n"
        "from tests.kernels.test_jit_cache import _adder\n"
        "a, out = np.arange(4.0, dtype=np.float32), np.empty(4, np.float32)\n"
        "first = _adder(1.0); jit_cache.attach([first]); first(a, out)\n"
        "cpu_loops.HAS_BF16 = not cpu_loops.HAS_BF16\n"
        "_adder(2.0)(a, out)  # any compile, cached loop or not\n"
        "cpu_loops.HAS_BF16 = not cpu_loops.HAS_BF16\n"
        "later = _adder(3.0); jit_cache.attach([later]); later(a, out)\n"
        "again = _adder(1.0); jit_cache.attach([again]); again(a, out)\n"
        "print(jit_cache._tainted, jit_cache.cache_hits([again]))\n"
    )
    env = {jit_cache.DIR_ENV: str(tmp_path), jit_cache.ENABLE_ENV: "1"}
    assert run_fresh(code, env) == "['kernels.backends.cpu_loops.HAS_BF16'] 1"
    assert len(_entries(tmp_path)) == 1  # k=1's, saved before; k=3's not


def test_a_switch_neither_0_nor_1_is_refused_by_name() -> None:
    """ "off" once left the cache on without a word: now the CPU backend's import stops on it, naming
    the variable, what it takes and what it got (a process that set it later gets the same at its
    next compile)."""
    env = {**os.environ, jit_cache.ENABLE_ENV: "off"}
    done = subprocess.run(
        [sys.executable, "-c", "import kernels.backends.cpu"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 1
    assert "ValueError: LOSSTUNE_JIT_CACHE: expected 0 or 1, got 'off'" in done.stderr
