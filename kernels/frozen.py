"""Run-time lookup of frozen tuned configs: kernels/configs/<backend>/<device>.json.

Lookup order: exact bucket, nearest bucket (same op, dtype, gradient kind, layout, reduction kind),
the device's best common config, the backend default (also where the contiguous loop's nearest or
common config streams and would be carried unstreamed; the CPU's transposed walk carried to a
smaller problem takes the default's tile: each space's tiling.Carry); where a device reads several tables (a CPU:
its microarchitecture's, then its vector tier's), each step goes through all of them in turn. A
file that is corrupt, of another schema, or whose entries no longer fit the current space is
reported once and skipped, never fatal.
"""

from __future__ import annotations

import dataclasses
import json
import platform
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

# code_hash and legacy_code_hash re-exported: the hashes of one module's text, canonical and legacy.
from kernels.codehash import code_hash as code_hash
from kernels.codehash import legacy_code_hash as legacy_code_hash
from kernels.codehash import legacy_source_hash, source_hash
from kernels.modes import Layout
from kernels.tiling import Space, Tiling

if TYPE_CHECKING:
    from kernels.executor import ProblemKey

SCHEMA_VERSION = 1
CONFIG_DIR = Path(__file__).parent / "configs"


class FrozenConfigWarning(UserWarning):
    """A frozen-config file or entry was skipped; the op falls back and goes on."""


@dataclass(frozen=True)
class FrozenTable:
    path: Path
    entries: tuple[dict[str, object], ...]
    common: dict[str, object] | None  # the device's best common config, by op


_KERNEL_SOURCES = {"cpu": "backends/cpu_loops.py"}
_TRITON_SOURCE = "backends/triton_loops.py"


def kernel_files(backend: str, op: str) -> tuple[str, str]:
    """The sources a config's kernel hash covers, relative to the kernels package: the backend's
    loops, then the op's module. Not kernels/scalar.py: no kernel compiles its bodies (the CPU
    loops overload each helper with their own code, and the Triton loops have their own formula),
    so what a formula's ``fma`` or ``ldexp`` becomes is in the loops' source."""
    return _KERNEL_SOURCES.get(backend, _TRITON_SOURCE), f"ops/{op}.py"


@cache
def _kernel_sources(backend: str, op: str) -> tuple[str, str]:
    package = Path(__file__).parent
    loops, op_module = ((package / name).read_text() for name in kernel_files(backend, op))
    return loops, op_module


@cache
def kernel_hash(backend: str, op: str) -> str:
    """Hash of the kernel code a config was tuned on: the backend's loops and the op's module
    (kernels.codehash.source_hash: the same under every Python minor). New entries take it."""
    return source_hash(*_kernel_sources(backend, op))


@cache
def legacy_kernel_hash(backend: str, op: str) -> str:
    """The same sources' legacy hash as this Python computes it (kernels.codehash.legacy_source_hash:
    ast.dump's text, which differs between Python minors): what tables frozen before the canonical
    hash hold."""
    return legacy_source_hash(*_kernel_sources(backend, op))


def current_hashes(backend: str, op: str) -> tuple[str, str]:
    """The kernel hashes an entry of ``op`` may carry and be current: the canonical one, and this
    Python's legacy one (a table frozen before the canonical hash, under this Python's minor,
    until tuner.restamp.migrate_hashes rewrites it)."""
    return kernel_hash(backend, op), legacy_kernel_hash(backend, op)


def is_current(backend: str, entry: dict[str, object]) -> bool:
    """Whether the entry (or common config) was tuned on the tree's kernel source: its kernel hash
    is the canonical hash of the current sources, or their legacy hash under this Python."""
    return entry.get("kernel_hash") in current_hashes(backend, str(entry.get("op")))


def stale_by_source(backend: str, table: FrozenTable) -> int:
    """The table's entries tuned on other kernel source than the tree's: skipped by the lookup
    until re-tuned, or restamped where their loops compile as before (tuner.restamp, CPU)."""
    return sum(1 for e in table.entries if not is_current(backend, e))


def config_path(backend: str, device: str, root: Path | None = None) -> Path:
    return (root or CONFIG_DIR) / backend / f"{device}.json"


def _report(path: Path, why: str, stacklevel: int = 4) -> None:
    # 4: from _usable, the frame that called lookup (dispatch.build); _read passes 5, one frame deeper
    warnings.warn(f"frozen config {path}: {why}; skipped", FrozenConfigWarning, stacklevel=stacklevel)


_on_reset: list[Callable[[], None]] = []


def on_reset(forget: Callable[[], None]) -> None:
    """Have :func:`reset` call ``forget``: a cache of what lookups returned (the plan cache,
    kernels/dispatch.py) registers here to drop it and retire the keys of calls under way."""
    _on_reset.append(forget)


# The tables read so far (load), and the count of resets: a read begun before a reset is not kept.
_tables: dict[tuple[str, str, Path | None], FrozenTable | None] = {}
_tables_epoch = 0
_tables_lock = threading.Lock()


def reset() -> None:
    """Forget every table read so far (call after writing one), and every cache registered with
    :func:`on_reset`."""
    global _tables_epoch
    with _tables_lock:
        _tables_epoch += 1
        _tables.clear()
    # after the tables: a call whose plan key is of the new epoch must not find the old table cached
    for forget in _on_reset:
        forget()


def load(backend: str, device: str, root: Path | None = None) -> FrozenTable | None:
    """Read and schema-check a table once per process (until :func:`reset`); None if absent or
    unusable (reported).

    Why not functools.cache: it stores what a call returns when the call returns, so a read of the
    old file that another thread's write and reset overtook was kept, and every later call got the
    old table until the next reset. Here a read is kept only if no reset came since it began; its
    own caller still gets it (that call began before the write, and dispatch's plan key retires it)."""
    key = (backend, device, root)
    with _tables_lock:
        if key in _tables:
            return _tables[key]
        epoch = _tables_epoch
    table = _read(config_path(backend, device, root))
    with _tables_lock:
        if epoch == _tables_epoch:
            _tables[key] = table
    return table


def _read(path: Path) -> FrozenTable | None:
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        _report(path, f"unreadable ({e})", stacklevel=5)
        return None
    if (
        not isinstance(data, dict)
        or data.get("schema_version") != SCHEMA_VERSION
        or not isinstance(data.get("entries"), list)
    ):
        _report(path, f"expected schema_version {SCHEMA_VERSION} with an entries list", stacklevel=5)
        return None
    common = data.get("common") if isinstance(data.get("common"), dict) else None
    return FrozenTable(path, tuple(e for e in data["entries"] if isinstance(e, dict)), common)


def common_name(op: str, log_target: object, layout: object = None) -> str:
    """The key of an op's best common config: KL with logTarget has its own ("kl_div-log"), and so
    does the transposed layout ("mse/transposed"): its walk has a space of its own, so a config won
    there is never legal elsewhere, and counted with the others it crowded them out."""
    transposed = layout == Layout.TRANSPOSED.value
    return op + ("-log" if log_target else "") + (f"/{Layout.TRANSPOSED.value}" if transposed else "")


def entry_log_target(entry: dict[str, object]) -> bool:
    """An entry's logTarget flag; tables frozen before KL tuned it apart lack the field (false)."""
    return bool(entry.get("log_target", False))


def _matches(entry: dict[str, object], key: ProblemKey, *, bucket: bool) -> bool:
    same = (
        entry.get("op") == key.op.value
        and entry.get("dtype") == key.dtype
        and entry.get("grad_kind") == key.grad_kind.value
        and entry.get("layout") == key.layout.value
        and entry.get("reduction_kind") == key.reduction_kind
        and entry_log_target(entry) == key.log_target
    )
    return same and (not bucket or entry.get("bucket") == key.bucket)


def _usable(
    table: FrozenTable, entry: dict[str, object], space: Space, backend: str, same_problem: bool = True
) -> Tiling | None:
    """The entry's config if it is still valid for the current space and kernels, else None (reported).

    An exact entry was tuned on this very space, so a different space hash means the space changed
    since (stale). A nearest-bucket or common entry was tuned on another problem's space by design
    (the CPU default's core count follows the size, so every bucket's space hashes differently):
    for those, being a legal point of the current space is the test.
    """
    try:
        config = Tiling.from_dict(entry["config"])  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError) as e:
        _report(table.path, f"entry {entry.get('op')}/{entry.get('bucket')} has a bad config ({e})")
        return None
    if same_problem and entry.get("space_hash") != space.hash:
        _report(
            table.path,
            f"entry {entry.get('op')}/{entry.get('bucket')} is stale: space hash "
            f"{entry.get('space_hash')} != current {space.hash}",
        )
        return None
    if not is_current(backend, entry):
        why = f"tuned on other kernel source{_python_note(entry)}"
        _report(table.path, f"entry {entry.get('op')}/{entry.get('bucket')} is stale: {why}")
        return None
    if config not in space:
        return None  # e.g. a common config whose variant is not legal for this layout
    return config


EXACT = "exact"  # lookup's source for an entry of the problem's own bucket: "frozen <file> [exact 2^N]"


def is_exact(source: str) -> bool:
    """Whether an executor's config_source is a table's exact entry (the one --freeze replaces), not
    a nearest bucket's, a common config or the default."""
    return source.startswith("frozen ") and f"[{EXACT} " in source


def lookup(
    backend: str, device: str | tuple[str, ...], key: ProblemKey, space: Space, root: Path | None = None
) -> tuple[Tiling, str] | None:
    """The frozen config for ``key`` and where it came from, or None (the backend default). ``device``:
    one table's device name, or several, most specific first (DeviceFacts.lookup_names): each step
    of the chain is tried in every table before the next step, so a more specific table's exact
    entry wins, but another table's exact entry still beats a nearest bucket or a common config,
    which are guesses. A guess that would run a streamed contiguous config unstreamed gives the
    default, with a source that says which entry it passed over (:func:`_carried`)."""
    tables = [t for t in (load(backend, d, root) for d in ((device,) if isinstance(device, str) else device)) if t]
    for table in tables:
        for entry in (e for e in table.entries if _matches(e, key, bucket=True)):
            config = _usable(table, entry, space, backend)
            if config is not None:
                return config, f"frozen {table.path.name} [{EXACT} 2^{key.bucket}]"
    for table in tables:
        for entry in nearest(table, key):
            config = _usable(table, entry, space, backend, same_problem=False)
            if config is not None:
                larger = int(entry["bucket"]) <= key.bucket  # type: ignore[call-overload]  # nearest: whole-number buckets only
                how = f"nearest 2^{entry.get('bucket')}"
                return _carried(config, space, table.path.name, how, larger=larger)
    for table in tables:
        common = (table.common or {}).get(common_name(key.op.value, key.log_target, key.layout.value))
        if isinstance(common, dict):
            config = _usable(table, common, space, backend, same_problem=False)
            if config is not None:
                return _carried(config, space, table.path.name, "best common", larger=False)
    return None


def nearest(table: FrozenTable, key: ProblemKey) -> list[dict[str, object]]:
    """The entries of ``key``'s problem at other buckets, nearest first (in log2 size; of two at one
    distance, the table's order): the candidates of the lookup's nearest step. An entry without a
    whole-number bucket has no distance, so it is never a nearest one."""
    return sorted(
        (
            e
            for e in table.entries
            if _matches(e, key, bucket=False) and isinstance(e.get("bucket"), int) and e["bucket"] != key.bucket
        ),
        key=lambda e: abs(int(e["bucket"]) - key.bucket),  # type: ignore[call-overload]
    )


def _python_note(entry: dict[str, object]) -> str:
    """Why a stale entry's hash may differ with the source unchanged. The kernel hash no longer
    depends on the Python that computes it (kernels.codehash.code_hash), but a table frozen before
    it holds legacy hashes of ast.dump's text, which differs between Python minors (3.12 adds
    type_params, 3.13 drops empty fields): the lookup accepts the legacy hash of this Python's
    minor only, so a legacy entry hashed under another minor reads stale here until migrated
    (tuner.restamp.migrate_hashes, run under that minor's hashes). Entries record their Python
    since session 38, older ones do not; which scheme a stale hash is of is not recorded, so the
    note is an "or"."""
    versions = entry.get("versions")
    hashed = str(versions.get("python", "")) if isinstance(versions, dict) else ""
    here = platform.python_version()
    if hashed and hashed.split(".")[:2] != here.split(".")[:2]:
        return (
            f" (or a legacy hash from Python {hashed}, whose syntax trees dump unlike this Python {here}'s:"
            " migrate it with tuner.restamp.migrate_hashes)"
        )
    return ""


def _carried(config: Tiling, space: Space, table: str, how: str, *, larger: bool) -> tuple[Tiling, str]:
    """A config tuned on another problem (``how``: "nearest 2^N" or "best common", of the table file
    ``table``), with its source (``frozen <table> [<how>, <notes>]``): capped at this problem's
    default core count unless ``larger`` (it goes to a problem at least as large as its own), and
    with ordinary stores unless ``larger`` or this problem's default streams (the transposed walk's
    does from 16 MiB of out on). The size-blind common config is never ``larger``.

    Every backend's default sizes its cores (threads, programs, AI cores) to the work; a config
    tuned at 2^16 with two threads, carried to 2^10, spent 8 us waking a thread for 1 us of work
    (results/performance.md). More cores than the default never pays on a smaller problem, so the
    cap keeps the tuned tile and variant and takes the default's parallelism. On a larger problem
    the tuned count stands: a default that stops growing (CUDA's 4 programs per SM) would undo the
    tuning there, as it did on an H200, where 2^24's 8 programs per SM went to 2^26 as 4
    (results/performance.md, section 57). Streamed stores pay
    only once out no longer fits the cache, and cost 1.0-1.25x where it still does (section 20): a
    smaller problem, or one of any size through the size-blind common config, stores as its own
    default does. A config carried from a smaller problem that did not stream does not switch off
    a default's streaming either: that smaller out may have fit the cache where this one does not.

    The space says where its loop departs from that (``space.carry``, tiling.Carry). In the
    contiguous loop (``streamed_whole``) a streamed config that would lose its streaming is not
    carried at all: the default runs, named as such (``default [<file> nearest 2^N streams]``). Its
    tile and prefetch were chosen with streamed stores, and without them they are a point no study
    measured: on the Zen 3, the 51 such carries of the AVX2 table (2^10-2^26) ran at 0.95-1.36x
    the default's time in a first run, and none ran more than 3% under it in every run; KL's 0-d
    common config (tile 256, prefetch 2) ran at 1.10-1.36x from 2^16 to 2^22 in each of three runs
    (results/performance.md, section 77). The first usable guess decides, as before: where a
    device reads several tables, a chip table's streamed entry gives the default, not the tier
    table's nearest entry (measured on the AVX2 host, which reads one table).

    And a config carried to a smaller problem takes the default's value of each knob the space
    names ``sized`` (``<knob> <value> as the default``): the CPU's transposed walk names its tile.
    The tile is the width of the walk's column blocks, so at a fixed tile a smaller problem has
    fewer blocks to share among the cores: the AVX2 table's tall
    tiles (16384, 32768 words), tuned at 2^22, carried down ran at 0.88-1.07x the default's time
    at 2^20 but 1.05-1.51x at 2^16, where a 16-bit walk's 32768-word block is the whole problem,
    one core's work (section 78). Its other knobs (the row, the order, the deferred stores) carry.
    The size-blind common config, never ``larger``, always takes the default's tile there; and a
    carry of one bucket down takes it too, though at 2^21 the 2^22 entries' tall tiles had won
    (0.73-0.86x): the AVX2 table has entries of its own at 2^20, 2^21 and 2^22 for every
    transposed problem, so neither step is reached on it, and the AVX-512 walks have one tile.
    """
    rule = space.carry  # the loop's own rules (tiling.Carry): the two exceptions below
    if rule.streamed_whole and config.stream and not space.default.stream and not larger:
        return space.default, f"default [{table} {how} streams]"
    notes = []
    for name in () if larger else rule.sized:
        value = getattr(space.default, name)
        sized = dataclasses.replace(config, **{name: value})
        if sized != config and sized in space:
            config = sized
            notes.append(f"{name} {value} as the default")
    if config.cores > space.default.cores and not larger:
        capped = dataclasses.replace(config, cores=space.default.cores)
        if capped in space:
            config = capped
            notes.append(f"cores capped at {capped.cores}")
    want = space.default.stream or (config.stream and larger)
    if config.stream != want:
        config = dataclasses.replace(config, stream=want)  # a member: every space with the knob has both
        notes.append("streamed as the default" if want else "not streamed")
    return config, f"frozen {table} [{how}" + "".join(f", {n}" for n in notes) + "]"
