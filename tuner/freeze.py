"""Freeze study winners into kernels/configs/<backend>/<device>.json: versioned, atomic, with provenance."""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Collection, Iterator
from pathlib import Path

from kernels import frozen
from kernels.tiling import Tiling
from tuner.study import busy_host, busy_reading, git_commit, held, log, study_rows, versions

KEY_FIELDS = ("op", "dtype", "bucket", "grad_kind", "layout", "reduction_kind")


def _umask() -> int:
    """This process's umask, read where Linux shows it (setting it to read it back is not safe
    beside threads that create files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path: Path, data: dict[str, object] | str) -> None:
    """Write to a temporary file beside the target, fsync, then rename: readers see old or new, never half.

    A dict is written as sorted JSON, a string as it is. The file keeps the mode of the one it
    replaces (a new one gets what open() would give it): mkstemp's private 0600 would otherwise
    leave a shared checkout's tables and reports readable by their writer alone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as f:
            if isinstance(data, str):
                f.write(data)
            else:
                json.dump(data, f, indent=1, sort_keys=True)
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def table_lock(path: Path) -> Iterator[None]:
    """The frozen table at ``path`` held against other writers from its read to its write: freeze,
    restamp and migrate_hashes each read the whole table, merge, and replace it, so two at once
    wrote each its own merge over the other's (a freeze's new entry gone, both saying they froze).
    An flock on ``.<name>.lock`` beside it (left there: removing it would let a third process lock
    another file of that name); the system releases it if the process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _provenance(row: dict[str, object], prev: dict[str, object] | None, now: dict[str, object]) -> dict[str, object]:
    """Each of an entry's provenance fields (``now``'s keys: the commit and package versions): what
    the decision recorded as it was measured (tuner.study); for one from before decisions recorded
    it, what the table's entry holds where that entry is this decision (same study, trial and
    config: the freeze that first wrote it is the nearest known to the measurement); else ``now``,
    this freeze's. So a freeze no longer restamps every entry with its own commit."""
    final = row["final"]
    assert isinstance(final, dict)
    decision = (row["study"], final["trial"], final["config"])
    frozen_before: dict[str, object] = {}
    if prev is not None and (prev.get("study"), prev.get("trial"), prev.get("config")) == decision:
        frozen_before = prev
    return {k: final.get(k, frozen_before.get(k, v)) for k, v in now.items()}


def _entry(row: dict[str, object], provenance: dict[str, object]) -> dict[str, object]:
    final = row["final"]
    assert isinstance(final, dict)
    return {
        **{k: row[k] for k in KEY_FIELDS},
        "log_target": row.get("log_target", False),
        "config": final["config"],
        "tuned": final["tuned"],
        "median_s": final["median_s"],
        "p20_s": final["p20_s"],
        "p80_s": final["p80_s"],
        "noise": final["noise"],
        "speedup_vs_default": final["speedup_vs_default"],
        "speedup_vs_vendor": final["speedup_vs_vendor"],
        "study": row["study"],
        "trial": final["trial"],
        **provenance,
        "kernel_hash": final["kernel_hash"],
        "space_hash": row["space_hash"],
        "case": row.get("case"),
        # the table's entry held against this run's contenders (tuner.study.settle): measured again, not won again
        **({"held": True} if held(final) else {}),
        # tuner.restamp's note, where the study's decision was carried over a kernel edit
        **({"restamped": final["restamped"]} if "restamped" in final else {}),
    }


def _merge_key(entry: dict[str, object]) -> tuple[object, ...]:
    """One entry per problem: KL with and without logTarget are two."""
    return (*(entry.get(k) for k in KEY_FIELDS), frozen.entry_log_target(entry))


COMMON_MIN_WINS = 2


def _config_key(config: object) -> str:
    """A config's identity when wins are counted: its Tiling with every knob spelled out. An entry
    frozen before a knob existed lacks its field, which means the knob's default; counted as raw
    JSON, one config frozen before and after looked like two. A re-freeze that rewrote some of an
    op's winners (the README main job on the Zen 5) split their wins under COMMON_MIN_WINS and
    dropped the op's common config (results/performance.md, section 87)."""
    try:
        return json.dumps(Tiling.from_dict(config).to_dict(), sort_keys=True)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # not a config this tree reads: counted as written
        return json.dumps(config, sort_keys=True)


def _best_common(entries: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    """Per op (and layout family, frozen.common_name), the tuned config that won most often (ties:
    best mean speedup over default).

    A config must have won at least COMMON_MIN_WINS studies: a single win is one problem's optimum
    (one thread at 2^16, say), and applied to every untuned dtype and size it cost 2x on the
    16-bit 2^24 cases (results/performance.md). With no common config the default is used.
    """
    by_op: dict[str, list[dict[str, object]]] = collections.defaultdict(list)
    for e in entries:
        if e["tuned"]:
            by_op[frozen.common_name(str(e["op"]), e.get("log_target"), e.get("layout"))].append(e)
    common = {}
    for op, wins in by_op.items():
        keyed = [(_config_key(e["config"]), e) for e in wins]  # each config parsed once
        counts = collections.Counter(k for k, _ in keyed)

        def score(key: str, keyed: list = keyed, counts: collections.Counter = counts) -> tuple:
            sp = [float(e["speedup_vs_default"]) for k, e in keyed if k == key]
            return counts[key], sum(sp) / len(sp)

        key = max(counts, key=score)
        if counts[key] < COMMON_MIN_WINS:
            continue
        # Of the entries that won with it, one spelled with every knob if there is one: frozen by
        # this tree's tuner, its hashes are the ones current code is checked against.
        matching = [e for k, e in keyed if k == key]
        example = next((e for e in matching if json.dumps(e["config"], sort_keys=True) == key), matching[0])
        common[op] = {k: example.get(k) for k in ("op", "log_target", "config", "kernel_hash", "space_hash")}
    return common


def freeze(
    storage: str | None,
    backend: str,
    device: str | None = None,
    root: Path | None = None,
    *,
    skip_busy: bool = False,
    studies: Collection[str] | None = None,
) -> tuple[Path, int]:
    """Merge every finished study of (backend, device) into the device's table; returns (path, entries).

    ``skip_busy``: leave out the decisions taken on a busy host (tuner.study.busy_host), each named
    in a warning; the table keeps what it held for those problems. Off by default: what a freeze
    writes would otherwise depend on the load of the host that tuned.

    A decision taken with CPU loop switches set (its ``cpu_forced``) is never merged: each is named
    in a warning, and the table keeps what it held for that problem.

    ``studies``: merge these studies alone (``tune --freeze``: the ones it just decided); the
    table keeps every other entry as it was. Merging the whole journal there rewrote the entries
    of studies the user had re-swept without freezing (results/performance.md, section 108). Each
    must be a finished study of ``backend`` in storage, or nothing is written."""
    rows = [r for r in study_rows(storage) if r.get("backend") == backend and isinstance(r.get("final"), dict)]
    if studies is not None:
        wanted = set(studies)
        if not wanted:
            raise ValueError("studies (--study): expected at least one study name, got none")
        missing = sorted(wanted - {str(r["study"]) for r in rows})
        if missing:
            raise ValueError(
                f"studies (--study): expected finished {backend} studies in {storage or 'the default journal'},"
                f" got {missing} (not there, not {backend}, or never decided)"
            )
        rows = [r for r in rows if r["study"] in wanted]
    if not rows:
        raise ValueError(f"storage: no finished {backend} studies to freeze in {storage or 'the default journal'}")
    devices = sorted({str(r["device"]) for r in rows})
    if device is None:
        if len(devices) != 1:
            raise ValueError(
                f"device: expected exactly one device among the {backend} studies, got {devices or 'none'}"
            )
        device = devices[0]
    if studies is not None and (elsewhere := sorted(str(r["study"]) for r in rows if r.get("device") != device)):
        raise ValueError(f"studies (--study): expected studies of device {device}, got {elsewhere} of another")
    rows = [r for r in rows if r.get("device") == device]
    if not rows:
        raise ValueError(
            f"--device: expected one of the devices of the finished {backend} studies {devices}, got {device!r}"
        )
    path = frozen.config_path(backend, device, root)
    with table_lock(path):
        return path, _merge_into(path, backend, device, rows, skip_busy)


def _merge_into(path: Path, backend: str, device: str, rows: list[dict[str, object]], skip_busy: bool) -> int:
    """freeze's read, merge and write of the table at ``path`` (under table_lock); its entries' count."""
    existing: list[dict[str, object]] = []
    if path.exists():
        # A table this cannot read is never replaced: its entries would go without a word. The
        # user restores it (git) or moves it aside, and freezes again.
        try:
            old = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(
                f"config: expected a readable frozen table at {path}, got {type(e).__name__}: {e};"
                " restore it or move it aside, then freeze again"
            ) from None
        version = old.get("schema_version") if isinstance(old, dict) else None
        if version != frozen.SCHEMA_VERSION or not isinstance(old.get("entries"), list):  # type: ignore[union-attr]
            raise ValueError(
                f"config: expected a frozen table of schema {frozen.SCHEMA_VERSION} at {path}, got schema {version!r};"
                " restore it or move it aside, then freeze again"
            )
        existing = old["entries"]
    now = {"git_commit": git_commit(), "versions": versions()}
    merged = {_merge_key(e): e for e in existing}
    tabled = set(merged)  # the problems the table held before this freeze
    for row in rows:
        key = _merge_key(row)  # a study row carries the key fields and log_target as its entry will
        forced = row["final"].get("cpu_forced")  # type: ignore[union-attr]
        if forced:
            # Its rounds ran loops, or walks of a space, that the processes reading this table do
            # not run unless they set the same switches (kernels.backends.cpu.LOOP_SWITCHES).
            log.warning(
                "%s: decided with %s set, not frozen: the table is read without them, and keeps %s",
                row["study"],
                forced,
                "its entry" if key in tabled else "no entry",
            )
            continue
        if skip_busy and busy_host(row["final"]):  # type: ignore[arg-type]
            kept = "its entry" if key in tabled else "no entry"
            log.warning(
                "%s: decided on a busy host (%s), not frozen (--skip-busy): the table keeps %s",
                row["study"],
                busy_reading(row["final"]),  # type: ignore[arg-type]
                kept,
            )
            continue
        merged[key] = _entry(row, _provenance(row, merged.get(key), now))
    entries = sorted(merged.values(), key=lambda e: tuple(str(k) for k in _merge_key(e)))
    table = {
        "schema_version": frozen.SCHEMA_VERSION,
        "backend": backend,
        "device": device,
        "entries": entries,
        "common": _best_common(entries),
    }
    write_atomic(path, table)
    frozen.reset()
    return len(entries)
