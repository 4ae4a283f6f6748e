"""Studies: one per (op, backend, device, dtype, shape bucket, gradient kind, layout, reduction kind).

Every trial is checked against the float64 reference before it is timed (an output of the same
bits as one that passed, by comparing the bits: _Bench.check); a config that breaks a space
constraint, fails to compile, raises, gives wrong values or runs past the time limit is recorded
with its reason and never wins. The backend default, the frozen config and the space's
seeds (Space.seeds: CUDA's large steps) are enqueued first. After the search the best finalists,
the default and the incumbent (the config the device's table gives this exact problem today) are
re-measured interleaved, with the incumbent's (or the default's) config again as a control; the
fastest replaces the incumbent, or the default where there is none, only if it gains 5% or more
over it (MIN_GAIN) and its rounds rank below the control's beyond chance (decide), then again in
fresh rounds of the winner, the baseline and the control (confirm): the rounds that picked the
fastest of several cannot also judge it. A change of what the op package picks needs that
evidence both ways: a tune whose rounds disagree (a busy host's, as a rule) keeps the table it
would freeze. Each decision records the host's load and the share of its finalists' run the tuner
waited for a CPU (busy_host).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib.metadata
import itertools
import json
import logging
import math
import os
import platform
import random
import socket
import statistics
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import optuna
import torch

from kernels import dispatch, frozen, timing
from kernels.executor import Executor
from kernels.modes import Variant
from kernels.tiling import Space, Tiling
from tuner.bench import grain_for
from tuner.goals import recorded_wait
from tuner.problems import Case

ROOT = Path(__file__).resolve().parents[1]
WORKER = f"{socket.gethostname()}:{os.getpid()}"  # who runs a trial, so a dead worker's trials can be reclaimed
DEFAULT_STORAGE = ROOT / "results" / "tuning" / "journal.log"
SMALL_SPACE = 128  # "auto" sweeps a valid space this small exhaustively, else TPE
FAILURE_KINDS = ("constraint", "compile", "incorrect", "runtime", "timeout")
# Failed trials that spend no budget: a constraint break is never compiled or run, an interrupted
# trial's measurement never finished (its point is taken up again), a superseded one never ran.
FREE_FAILURES = ("constraint", "interrupted", "superseded")


def git_commit() -> str:
    """This checkout's HEAD, or "unknown" outside a git checkout."""
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def versions() -> dict[str, str]:
    # Python's own, recorded as the packages' are. The kernel hash no longer depends on it (the
    # canonical dump, kernels.codehash.code_hash), but a table frozen before that holds legacy hashes
    # of ast.dump's text, current only under the minor they were hashed on (kernels.frozen._python_note
    # names it for a stale entry; tuner.restamp.migrate_hashes moves such a table to the canonical hash).
    found = {"python": platform.python_version()}
    for dist in ("losstune", "torch", "numba", "triton", "optuna", "numpy"):
        try:
            found[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


optuna.logging.set_verbosity(optuna.logging.WARNING)
log = logging.getLogger("losstune")


class TrialFailure(Exception):
    """A config that cannot win; ``kind`` is one of FAILURE_KINDS."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(f"{kind}: {reason}")
        self.kind = kind


# Within shared_journals(), the journal storages opened so far, by the file's resolved path; None
# outside it. Opening a journal replays the whole log: 3.4 s for the committed 72 MB one on the
# 480 MiB-L3 Xeon, which `tune` paid once per study (24 times in the README's main job) and freeze
# once more, and the dashboard twice (results/performance.md, section 110).
_SHARED: dict[Path, optuna.storages.JournalStorage] | None = None


@contextlib.contextmanager
def shared_journals() -> Iterator[None]:
    """Within it, open_storage hands out one storage object per journal file: a command's studies
    (tune, its freeze, the dashboard's loaders) replay the file once. Optuna's journal storage reads
    what other processes append, from the offset it has read, on every access; what it cannot see
    is the file replaced under it (a checkout, a copy onto it), whose offsets are another log's.
    So the sharing lasts one command, not the process (before it, each study opened its own and
    held it for its run): a journal is not to be replaced while a command runs on it. A file's
    inode, first record or size cannot tell a replaced one (a checkout may reuse the inode, and
    every copy of a shared journal starts with the same record; a helper's review, section 110).
    Nested, the outer one's holds."""
    global _SHARED
    outer = _SHARED
    _SHARED = {} if outer is None else outer
    try:
        yield
    finally:
        _SHARED = outer


def _check_journal(path: Path, lock: optuna.storages.journal.JournalFileOpenLock, *, writer: bool) -> None:
    """What optuna's replay lets through: it skips a journal's last line where that line does not
    parse, taking it for a record another process is still writing. So a file of one line of other
    text (a mistyped ``--storage notes.log``) read as an empty journal, and a writer appended its
    records to it, after which the file no longer replayed. Under the journal's lock (writers hold
    it while they append, so a line without its newline there is a cut-off write, not one in
    progress) the first line must be a journal record, and a writer refuses a file whose last line
    was cut off: optuna would append the next record onto it and leave a line that never parses.
    A reader that cannot make the lock's file (a read-only checkout) checks without it, and lets a
    first line without its newline pass: it may be a record in its write."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        locked = lock.acquire()
    except OSError:  # a folder this process cannot write (a reader of a read-only checkout)
        if writer:
            raise
        locked = False
    try:
        with path.open("rb") as f:
            first = f.readline()
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(size - 1)
            tail = 0  # the bytes after the last newline: a cut-off record, counted under the lock
            if f.read(1) != b"\n":
                f.seek(0)
                tail = size - f.read().rfind(b"\n") - 1
    finally:
        if locked:
            lock.release()
    if not locked and not first.endswith(b"\n"):
        return  # unlocked, the first record may be in its write: optuna's replay reads what there is
    try:
        record = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        record = None
    if not isinstance(record, dict) or "op_code" not in record:
        raise ValueError(
            f"storage: expected an optuna journal (one JSON record a line), got {str(path)!r}, whose first line is"
            f" not one ({first[:60]!r})"
        )
    if tail:
        cut = (
            f"storage: {str(path)!r} ends in a record cut off mid-write ({tail} bytes after its last newline,"
            f" a process killed while appending)"
        )
        if writer:  # locked: a writer could open the lock's file
            raise ValueError(
                f"{cut}; a write would join the next record to it and leave a line that never replays. The cut"
                f" record is lost either way: remove its bytes (truncate -s {size - tail} {path}) and run again"
            )
        if locked:  # unlocked, it may be a record in its write
            log.warning("%s; reading the records before it", cut)


def _journal(path: Path, create: bool = True) -> optuna.storages.JournalStorage:
    """A storage of the journal file at ``path``: shared_journals()' one, else a fresh one.
    ``create``: make the file (and its folders) where it is missing; a reader (show, freeze) says
    it is missing instead, so a mistyped path leaves nothing behind."""
    if not create and not path.is_file():
        raise ValueError(f"storage: expected an existing journal file, got {str(path)!r} (no such file)")
    path.parent.mkdir(parents=True, exist_ok=True)
    key = path.resolve()  # the backend and its lock take it too: a later chdir moves nothing
    if _SHARED is not None and key in _SHARED:
        return _SHARED[key]
    lock = optuna.storages.journal.JournalFileOpenLock(str(key))
    _check_journal(path, lock, writer=create)
    backend = optuna.storages.journal.JournalFileBackend(str(key), lock_obj=lock)
    try:
        storage = optuna.storages.JournalStorage(backend)  # replays the file
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(
            f"storage: expected an optuna journal (one JSON record a line), got {str(path)!r}, which holds other text"
            f" ({type(e).__name__}: {e})"
        ) from None
    if _SHARED is not None:
        _SHARED[key] = storage
    return storage


def journal_path(url: str | None) -> Path | None:
    """The journal file a storage URL names (the default one for None); None for an RDB URL."""
    if url is None or url.startswith("journal:") or url.endswith(".log"):
        return Path(url.removeprefix("journal:")) if url else DEFAULT_STORAGE
    return None


def open_storage(url: str | None, *, create: bool = True) -> optuna.storages.BaseStorage:
    """The embedded journal file (safe for several processes on one host; one storage object per
    file within shared_journals()), or an RDB URL (PostgreSQL). ``create``: as _journal's."""
    journal = journal_path(url)
    if journal is not None:
        return _journal(journal, create)
    assert url is not None
    if url.startswith(("postgresql://", "postgresql+", "sqlite://", "mysql")):
        return optuna.storages.RDBStorage(url, heartbeat_interval=30, grace_period=120)
    raise ValueError(f"storage: expected a journal file path or a postgresql:// URL, got {url!r}")


# A sampled (TPE or random) study's measured trials where --trials is not given; a grid sweeps its points.
SAMPLED_TRIALS = 40


@dataclass(frozen=True)
class TuneOptions:
    backend: str = "cpu"
    sampler: str = "auto"  # auto, tpe, random, grid
    # measured trials in the study, shared by its workers; None: the whole grid, or SAMPLED_TRIALS
    trials: int | None = None
    timeout_s: float | None = None
    seed: int = 0
    storage: str | None = None
    study_name: str | None = None
    min_time_s: float = 0.05
    finalists: int = 3
    rounds: int = 5
    trial_timeout_s: float = 10.0
    resweep: bool = False  # every earlier trial of the study is history (Sweep.first)
    # how the sweep's trials, the finalists' rounds and a confirmation's take their samples; None: as
    # bench --report's rows of the case's size (bench.grain_for: launch by launch on the CPU from 2^24
    # elements); launch by launch, the size-matched copy runs between the launches (_grain)
    grain: timing.Grain | None = None


@dataclass
class StudyResult:
    name: str
    case: Case
    trials: int
    failures: dict[str, int]
    final: dict[str, object] = field(default_factory=dict)

    def row(self) -> dict[str, object]:
        return {
            "study": self.name,
            "case": self.case.label(),
            "trials": self.trials,
            "failures": self.failures,
            **self.final,
        }


_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors of one dtype and shape hold the same bits in every element (a NaN equals
    a NaN of its own pattern, +0 differs from -0: torch.equal on the values says neither)."""
    return (
        a.shape == b.shape
        and a.dtype == b.dtype
        and torch.equal(a.view(_BITS[a.element_size()]), b.view(_BITS[b.element_size()]))
    )


@dataclass
class _Bench:
    """A case's tensors on a backend, reference computed once, and a way to build executors."""

    case: Case
    backend: str
    g: torch.Tensor
    x: torch.Tensor
    t: torch.Tensor
    out: torch.Tensor
    ref: torch.Tensor
    # A copy of the first out that met the bar (check), with the reference and inputs it met it
    # against; None before one has.
    passed: tuple[torch.Tensor, tuple[torch.Tensor, ...]] | None = field(default=None, repr=False)

    @classmethod
    def make(cls, case: Case, backend: str) -> _Bench:
        device = timing.backend_device(backend)
        g, x, t = case.inputs(device)
        return cls(case, backend, g, x, t, case.out_like(x), case.reference(g, x, t))

    def executor(self, config: Tiling | None) -> Executor:
        return self.case.phase_one(self.g, self.x, self.t, self.out, self.backend, config)

    def check(self, ex: Executor) -> str | None:
        """``ex``'s output against the reference (Case.mismatch), launched into an out filled with
        NaN, so that an element it leaves unwritten fails. An out of the same bits as one that has
        met the bar meets it too, without the check, while ref and the inputs are the tensors it
        met it against: the bar reads nothing else, and no launch writes them. The loops' bits mostly
        do not depend on the config (the backends pick a formula by the dtypes and the gradient's
        size alone; a broadcast sum's order follows its tiles), so after the first trial nearly
        every correct one is a compare: at 2^24 elements the check took 109-458 ms a trial, the
        compare 12-28 ms with the fill and the launch (results/performance.md, section 110). A
        config whose bits differ (a broadcast sum's order, a wrong value, a missed element) is
        checked in full."""
        self.out.fill_(float("nan"))
        dispatch.run(ex)
        against = (self.ref, self.g, self.x, self.t)
        same = self.passed is not None and all(a is b for a, b in zip(self.passed[1], against, strict=True))
        if same and _same_bits(self.out, self.passed[0]):
            return None
        wrong = self.case.mismatch(self.out, *against)
        if wrong is None and not same:
            self.passed = (self.out.clone(), against)
        return wrong

    def runner(self, ex: Executor) -> Callable[[int], object]:
        run = dispatch.run  # what a public call launches through (a plan's launcher where it has one)
        return lambda _: run(ex)

    def bytes(self) -> int:
        return timing.bytes_moved(self.case.read_tensors(self.g, self.x, self.t), self.out)

    @functools.cached_property
    def copy(self) -> Callable[[int], object]:
        """The size-matched copy bench --report's roofline rows time beside the kernel
        (timing.copy_probe), run between a launch-by-launch sweep's launches (_grain)."""
        return timing.copy_probe(str(self.out.device), self.bytes())[0]


class Timed(str, Enum):
    """How a sweep times its trials (_trial_timing), tagged on each (Sweep.timed)."""

    RUN = "run"  # timing.measure: run by run, the kernel's launches back to back
    LAUNCH_COPY = "launch+copy"  # launch by launch, each launch after the size-matched copy's


def _timed(bench: _Bench, opts: TuneOptions) -> Timed:
    return Timed.LAUNCH_COPY if _grain(bench, opts) is timing.Grain.LAUNCH else Timed.RUN


def _grain(bench: _Bench, opts: TuneOptions) -> timing.Grain:
    """How a study times its case: TuneOptions.grain, or bench --report's grain for rows of the
    case's size. Launch by launch, each launch follows the size-matched copy's, as in the report's
    roofline rows: timed alone, launch after launch on one out, a 2^24 case's tensors stayed in the
    Xeon's L3, where streamed stores lost (kl_div bfloat16 0-d: 1.6-1.9 ms against the default's
    1.5), and the sweep never offered them to the finalists; with the copy between launches, the
    regime the report measures, streamed stores with prefetch took 0.78x the default's time
    (results/performance.md, section 108)."""
    return opts.grain or grain_for(opts.backend, bench.case.numel)


def name_for(case: Case, bench: _Bench, backend: str) -> str:
    ex = bench.executor(None)
    return f"{backend}-{ex.device}-{ex.key.label()}" + ("-log" if case.log_target else "")


def _config_from_params(space: Space, params: dict[str, object]) -> Tiling:
    values = dict(params)
    if "variant" in values:
        values["variant"] = Variant(values["variant"])
    return dataclasses.replace(space.default, **values)


def _params(space: Space, config: Tiling) -> dict[str, object]:
    return {name: (v.value if isinstance(v := getattr(config, name), Variant) else v) for name, _ in space.knobs}


def _choices(space: Space) -> dict[str, list[object]]:
    return {name: [v.value if isinstance(v, Variant) else v for v in values] for name, values in space.knobs}


def _trial_timing(bench: _Bench, ex: Executor, opts: TuneOptions) -> timing.Timing:
    """A sweep trial's timing: run by run, the kernel's launches back to back; launch by launch
    (_grain), each of its launches after one of the size-matched copy, the kernel's time alone kept."""
    if _timed(bench, opts) is Timed.LAUNCH_COPY:
        runs = [bench.runner(ex), bench.copy]
        return timing.interleaved(
            runs, bench.out.device, rounds=1, min_time_s=opts.min_time_s, grain=timing.Grain.LAUNCH
        )[0].summary()
    return timing.measure(bench.runner(ex), bench.out.device, min_time_s=opts.min_time_s)


def _objective(bench: _Bench, sweep: Sweep, opts: TuneOptions) -> Callable[[optuna.Trial], float]:
    space = sweep.space
    choices = _choices(space)

    def objective(trial: optuna.Trial) -> float:
        try:
            return measured(trial)
        except KeyboardInterrupt:
            # optuna fails the trial and raises it again: tagged, its point is taken up again by the
            # next run (_points) and it spends no budget (FREE_FAILURES), as a killed worker's does.
            trial.set_user_attr("failure", "interrupted")
            raise

    def measured(trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", WORKER)
        for k, v in sweep.tags().items():  # which sweep it belongs to (Sweep.holds)
            trial.set_user_attr(k, v)
        params = {name: trial.suggest_categorical(name, values) for name, values in choices.items()}
        config = _config_from_params(space, params)

        def fail(kind: str, reason: str) -> TrialFailure:
            trial.set_user_attr("failure", kind)
            trial.set_user_attr("reason", reason[:500])
            return TrialFailure(kind, reason)

        broken = space.violations(config)
        if broken:
            raise fail("constraint", "; ".join(broken))
        try:
            ex = bench.executor(config)
            wrong = bench.check(ex)  # the first launch also compiles
        except Exception as e:  # noqa: BLE001 - any failure of a candidate kernel is data, not a crash
            kind = "compile" if type(e).__module__.startswith(("triton", "numba")) else "runtime"
            raise fail(kind, f"{type(e).__name__}: {e}") from e
        if wrong:
            raise fail("incorrect", wrong)
        once = timing.measure(bench.runner(ex), bench.out.device, warmup=0, min_time_s=0, min_runs=1, max_runs=1)
        if once.median_s > opts.trial_timeout_s:
            raise fail("timeout", f"one run took {once.median_s:.3g} s > {opts.trial_timeout_s} s")
        result = _trial_timing(bench, ex, opts)
        trial.set_user_attr("timing", result.to_dict())
        trial.set_user_attr("config", config.to_dict())
        return result.median_s

    return objective


def _sampler(opts: TuneOptions, space: Space) -> optuna.samplers.BaseSampler:
    kind = opts.sampler
    if kind == "auto":
        kind = "grid" if space.size <= SMALL_SPACE else "tpe"
    if kind == "grid":
        # Exhaustive sweeps enqueue every valid point themselves (tune_case): optuna's GridSampler
        # would visit the enqueued default twice and cannot resume a killed run's lost point.
        return optuna.samplers.RandomSampler(seed=opts.seed)
    if kind == "tpe":
        return optuna.samplers.TPESampler(seed=opts.seed, n_startup_trials=10)
    if kind == "random":
        return optuna.samplers.RandomSampler(seed=opts.seed)
    raise ValueError(f"sampler: expected auto, tpe, random or grid, got {opts.sampler!r}")


def _trial_params(trial: optuna.trial.FrozenTrial) -> dict[str, object]:
    # A waiting (enqueued, not yet run) trial keeps its params in system_attrs["fixed_params"].
    return trial.params or trial.system_attrs.get("fixed_params", {})


def _of_space(trial: optuna.trial.FrozenTrial, space: Space) -> bool:
    """Whether a trial belongs to the sweep of ``space``.

    A study is named by its case, not by its space, so a new knob (or a changed list of values)
    resumes the same study under another space. Its earlier trials stay in storage as history, but
    they neither spend the new sweep's budget nor stand as finalists: they were drawn from another
    space, and measured in another session. (Counting them once left half of a grown grid unrun:
    eight of the sixteen points of each 16-bit transposed study when defer_out came.) A trial from
    before trials carried their space's hash is the space's if it has exactly its knobs, each at
    one of its values.
    """
    tag = trial.user_attrs.get("space_hash")
    if tag is not None:
        return tag == space.hash
    params, choices = _trial_params(trial), _choices(space)
    return set(params) == set(choices) and all(params[k] in choices[k] for k in choices)


@dataclass(frozen=True)
class Sweep:
    """What a trial must have been measured under to count in a study's sweep: a point of ``space``,
    run on a kernel that is today's (``kernel``, which new trials carry) or one ``restamp`` found to
    compile as today's for the study's decision (``same``: restamp compiles the decided config only,
    and the other points are taken on that evidence, as the frozen table takes the entry).

    A study is named by its case, so a kernel edit resumes it too; the trials measured on the old
    loops are history then, as an old space's are. (Counting them once made a resumed study after an
    edit of cpu_loops.py re-run none of its grid: the old times ranked the finalists, and only they
    and the default were measured on the new loops.) ``untagged``: whether trials from before they
    carried their kernel's hash count; they do where the study's decision was made or restamped on
    today's kernel, or where it has none yet, until a sweep has set them aside once (the study's
    ``untagged_history``, which tune_case records: the decision that sweep writes is today's).

    ``first``: the first trial number of the sweep, where ``tune --resweep`` started one (the study's
    ``sweep_from``). It is for what neither hash sees: an edit of the backend's gates (cpu.py) that
    changes which loops run, or trials from before the kernel tag measured on loops since edited.

    ``timed``: how the sweep times a trial (a Timed value, _trial_timing); a finished trial timed
    otherwise ranked on another clock and is history. Timed alone, a 2^24 case's tensors stayed in
    the Xeon's L3 and ranked streamed stores last; between copies they took 0.78x the default's time
    (results/performance.md, section 108): mixed, the finalists were picked from two regimes. Only a
    finished (COMPLETE) trial has a time: a queued point takes the sweep's tag when it runs
    (_objective), and a failed one failed on the kernel, not the clock.

    ``forced``: the CPU backend's loop switches set in the process that sweeps
    (kernels.backends.cpu.forced_tag; "" where none is, and on other backends). A trial timed under
    other switches ran other loops, or was drawn from a space that offered other walks, so it is
    history for this sweep as an edited kernel's is; a trial from before the tag counts as run with
    none set.

    ``untagged_timed``: how the trials from before the tag were timed (untagged_timing). Every sweep
    timed its trials run by run before bd45c9b, and launch by launch with the copy between after it,
    and only the studies session 88 swept again from scratch were swept after it untagged: so it is
    read off the study's decision at the first sweep that sees it (``copy_between``) and recorded on
    the study (``untagged_timed``), since that sweep's own decision will say how it timed, not them.
    """

    space: Space
    kernel: str
    same: frozenset[str] = frozenset()
    untagged: bool = True
    first: int = 0
    timed: Timed = Timed.RUN
    untagged_timed: Timed = Timed.RUN
    forced: str = ""

    @classmethod
    def of(cls, study: optuna.Study, space: Space, backend: str, op: str, timed: Timed = Timed.RUN) -> Sweep:
        current, attrs = frozen.current_hashes(backend, op), study.user_attrs
        final = attrs.get("final")
        untagged, same = not attrs.get("untagged_history"), frozenset[str]()
        if isinstance(final, dict):
            if final.get("kernel_hash") in current:
                same = frozenset(final.get("same_kernels", ())) - {current[0]}
            else:  # the decision is an older kernel's: so are its untagged trials
                untagged = False
        first = int(attrs.get("sweep_from", 0))
        return cls(space, current[0], same, untagged, first, timed, untagged_timing(attrs), forced_tag(backend))

    def tags(self) -> dict[str, object]:
        """The user attributes that place a new trial in this sweep."""
        return {
            "space_hash": self.space.hash,
            "kernel_hash": self.kernel,
            "timed": self.timed.value,
            "cpu_forced": self.forced,
        }

    def holds(self, trial: optuna.trial.FrozenTrial) -> bool:
        if trial.number < self.first or not _of_space(trial, self.space):
            return False
        if trial.user_attrs.get("cpu_forced", "") != self.forced:
            return False
        timed = trial.user_attrs.get("timed", self.untagged_timed.value)
        if trial.state == optuna.trial.TrialState.COMPLETE and timed != self.timed.value:
            return False
        tag = trial.user_attrs.get("kernel_hash")
        return self.untagged if tag is None else tag == self.kernel or tag in self.same


def forced_tag(backend: str) -> str:
    """The CPU backend's loop switches set in this process (kernels.backends.cpu.forced_tag) where
    ``backend`` is the CPU's; "" for the others, whose kernels no such switch changes."""
    if backend != "cpu":
        return ""
    from kernels.backends import cpu  # numba's loops: imported where the CPU backend is tuned

    return cpu.forced_tag()


def untagged_timing(attrs: dict[str, object]) -> Timed:
    """How a study's trials from before the timing tag were timed (Sweep.untagged_timed): as the
    study records it, else as its decision's rounds were (``copy_between``: swept after bd45c9b)."""
    recorded, final = attrs.get("untagged_timed"), attrs.get("final")
    if recorded is not None:
        return Timed(recorded)
    between = isinstance(final, dict) and final.get("copy_between") is True
    return Timed.LAUNCH_COPY if between else Timed.RUN


def restamped_final(final: dict[str, object], kernel: str) -> dict[str, object]:
    """A study's final decision carried onto ``kernel`` by restamp (its config compiles there as on the
    hash it holds): the trials of every hash the chain has crossed keep counting (Sweep.same). A new
    decision on some other kernel starts the chain again (tune_case)."""
    crossed = final.get("same_kernels")
    chain = [*(crossed if isinstance(crossed, list) else []), final.get("kernel_hash")]
    return final | {"kernel_hash": kernel, "same_kernels": [h for h in dict.fromkeys(chain) if h and h != kernel]}


def _points(
    trials: list[optuna.trial.FrozenTrial], sweep: Sweep, *, finished: bool, free: tuple[str, ...] = ("interrupted",)
) -> list[dict[str, object]]:
    """The params of the trials of ``sweep``: ``finished`` ones only, or queued and running ones
    too; none that failed as one of ``free`` (an interrupted trial's point is taken up again)."""
    return [
        _trial_params(t)
        for t in trials
        if (t.state.is_finished() or not finished) and t.user_attrs.get("failure") not in free and sweep.holds(t)
    ]


def _supersede_waiting(study: optuna.Study, sweep: Sweep) -> int:
    """Enqueued points the sweep must not run, failed as "superseded": those of an earlier space
    (optuna would draw the knobs they lack at random) or kernel, and those already measured or
    queued (the queues that tuners before _of_space left behind hold points twice)."""
    trials = study.get_trials(deepcopy=False)
    seen = _points(trials, sweep, finished=True)
    stale = []
    for t in (t for t in trials if t.state == optuna.trial.TrialState.WAITING):
        if not sweep.holds(t) or _trial_params(t) in seen:
            stale.append(t)
        else:
            seen.append(_trial_params(t))
    superseded = 0
    for t in stale:
        # Another worker on the study may have taken it up since the read: its trial, then.
        if study._storage.get_trial(t._trial_id).state != optuna.trial.TrialState.WAITING:
            continue
        study._storage.set_trial_user_attr(t._trial_id, "failure", "superseded")
        study._storage.set_trial_state_values(t._trial_id, state=optuna.trial.TrialState.FAIL)
        superseded += 1
    return superseded


def _enqueue_once(study: optuna.Study, sweep: Sweep, configs: list[Tiling]) -> None:
    seen = _points(study.get_trials(deepcopy=False), sweep, finished=False)
    for config in configs:
        params = _params(sweep.space, config)
        if params not in seen:  # dedupe here; a lost point comes back
            study.enqueue_trial(params, user_attrs=sweep.tags(), skip_if_exists=False)
            seen.append(params)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reclaim_interrupted(study: optuna.Study) -> int:
    """Trials left RUNNING by a killed worker of this host: marked failed ("interrupted").

    The grid sampler takes a failed point up again; TPE and random sample afresh.

    Their measurement never finished, so nothing finished is lost or measured twice. Trials of live
    workers, and of other hosts (which RDB storage's heartbeat reclaims), are left alone.
    """
    host = socket.gethostname()
    reclaimed = 0
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = str(t.user_attrs.get("worker", ""))
        name, _, pid = worker.rpartition(":")
        if name != host or not pid.isdigit() or _alive(int(pid)):
            continue
        study._storage.set_trial_user_attr(t._trial_id, "failure", "interrupted")
        study._storage.set_trial_state_values(t._trial_id, state=optuna.trial.TrialState.FAIL)
        reclaimed += 1
    return reclaimed


# The smallest median gain the gate keeps. Smaller wins are not worth an entry that every kernel
# change makes stale (the re-tune costs minutes), and this host cannot tell them from its floor:
# one config read itself within 5-8% (quartiles) over 25 rounds, and at 2% both README main jobs
# kept one config at a 0.97 round median (chance 0.028) that their bench tables read at 0.99x and
# 1.02x the default's speed (performance.md, sections 80-81). The kept transposed entries gained 10%
# or more by the median.
MIN_GAIN = 0.05

# How many draws a TPE or random study may make per measured trial still owed, counting those that
# break a constraint; a bound, so a sampler that keeps drawing broken points still ends.
UNMEASURED_DRAWS = 8


def round_ratios(baseline: list[float], winner: list[float]) -> list[float]:
    """Each round's winner median over the baseline's: what ``decide`` judges, and what a study's
    decision records (``final["round_ratios"]``) so another gate can be replayed on it."""
    return [w / d for w, d in zip(winner, baseline, strict=True)]


# The gate's chance of keeping a config no faster than the baseline's: the winner's rounds must rank
# below the control's so far that two configs of one speed would do it this often or less.
ALPHA = 0.05


def out_of_order(ratios: list[float], control: list[float]) -> float:
    """The Mann-Whitney U of the winner's round ratios against the control's: the pairs (winner
    round, control round) in which the winner did not read faster than the control, a tie counting
    half. 0: every winner round below every control round."""
    return sum(1.0 if w > c else 0.5 if w == c else 0.0 for w in ratios for c in control)


@functools.cache
def _orderings(m: int, n: int) -> tuple[int, ...]:
    """How many of the C(m+n, m) orders of m winner and n control rounds have each U (0..m*n)."""
    if m == 0 or n == 0:
        return (1,)
    counts = [0] * (m * n + 1)
    # the largest of the m+n values is a winner round (above all n control rounds) or a control round
    for u, k in enumerate(_orderings(m - 1, n)):
        counts[u + n] += k
    for u, k in enumerate(_orderings(m, n - 1)):
        counts[u] += k
    return tuple(counts)


def chance(ratios: list[float], control: list[float]) -> float:
    """The chance that a config of the baseline's speed ranks this far below the control or further
    (the exact one-sided Mann-Whitney p-value): the share of all orders of the two sets of rounds
    with a U no larger than ``out_of_order``'s, a half from a tie rounded up (against keeping).
    With 5 rounds each, all 5 below all 5 is 1/252; 3 each reach ALPHA only all below all (1/20);
    no order of 2 rounds each gets under 1/6."""
    counts = _orderings(len(ratios), len(control))
    u = math.ceil(out_of_order(ratios, control))
    return sum(counts[: u + 1]) / sum(counts)


@dataclass(frozen=True)
class Verdict:
    """What the gate read on one set of rounds (``decide``), kept whole so that a decision records
    the very ratios and chance it was taken on."""

    kept: bool
    gain: float  # 1 - the winner's median over the baseline's
    noise: float  # the relative spread of the winner's ratios
    ratios: list[float]  # each round's winner over the baseline
    control: list[float]  # each round's control over the baseline
    chance: float  # of ratios ranking this far below the control's at the baseline's speed


def fewest_rounds() -> int:
    """The fewest rounds in which the gate can keep a winner at all: all its rounds below all the
    control's must have a ``chance`` of ALPHA or less (3: 1/20; 2 rounds each are 1/6 at best)."""
    return next(m for m in itertools.count(1) if chance([0.0] * m, [1.0] * m) <= ALPHA)


def decide(baseline: list[float], winner: list[float], control: list[float]) -> Verdict:
    """Whether the winner's round medians beat the baseline's, and what the gate read to say so.

    All three ran in every round, in shuffled order, so the comparison is paired, round by round:
    each round's winner over the baseline is its ratio, and the control (the baseline's config
    again, an executor of its own) gives the same ratio for two runs of one config. The winner is
    kept if its median ratio gains MIN_GAIN or more and its ratios rank below the control's with a
    ``chance`` of ALPHA or less. A slow spell of the shared host that hits one round slows all
    three and cancels in the ratios; the control's ratios are the floor the host leaves, which a
    fixed bar in every round (this gate's predecessor: 2% in all of them) could not see: in
    the L3 one config read 0.86-1.19 of itself round by round, and one such round vetoed a tile that
    read 0.73-0.82x the default's time in four other runs (performance.md, sections 79-80). The
    floor moves with the host's hour, at DRAM-bound sizes too (one config 0.77-1.35 of itself over
    25 rounds at 2^24, section 80), so it is measured, not assumed. ALPHA is per comparison: the
    winner is the fastest of several contenders, so a decision's chance of keeping a config of the
    baseline's speed is somewhat higher. ``noise`` is the relative spread of the winner's ratios,
    reported beside the gain.
    """
    ratios = round_ratios(baseline, winner)
    floor = round_ratios(baseline, control)
    noise = (max(ratios) - min(ratios)) / statistics.median(ratios) if len(ratios) > 1 else 0.0
    gain = 1.0 - statistics.median(winner) / statistics.median(baseline)
    read = chance(ratios, floor)
    return Verdict(statistics.median(ratios) <= 1.0 - MIN_GAIN and read <= ALPHA, gain, noise, ratios, floor, read)


@dataclass(frozen=True)
class Settled:
    """The finalists' decision: indices into the contenders, and what the gate saw."""

    chosen: int
    winner: int  # the lowest median of all
    switched: bool  # the winner replaced the baseline
    noise: float
    ratios: list[float]  # each round's winner over the baseline
    control: list[float]  # each round's control (the baseline's config again) over the baseline
    # of the winner's ratios ranking so far below the control's at the baseline's speed; None where
    # the winner is the baseline, whose ratios are all 1 and no reading of the gate
    chance: float | None


def settle(medians: list[float], rounds: list[list[float]], baseline: int, control: list[float]) -> Settled:
    """Which contender the table gets: the one with the lowest median, if ``decide`` keeps it
    against ``baseline`` (the incumbent, or the default where the table has no exact entry) and
    ``control`` (the baseline's config timed again in the same rounds), else the baseline. The
    incumbent is held to the same gate as any challenger: the default replaces it only by beating
    it as far. Rounds that disagree (a busy host's) change nothing; before, every such decision
    fell back to the default and --freeze wrote it over 4 of 28 tuned entries (performance.md,
    section 73)."""
    winner = min(range(len(medians)), key=lambda i: medians[i])
    v = decide(rounds[baseline], rounds[winner], control)  # the baseline against itself: never kept
    read = v.chance if winner != baseline else None
    return Settled(winner if v.kept else baseline, winner, v.kept, v.noise, v.ratios, v.control, read)


def confirm(settled: Settled, baseline: int, fresh: list[list[float]]) -> tuple[Settled, Verdict]:
    """The settled decision after the winner, the baseline and the control were timed again in
    fresh interleaved rounds (``fresh``: their round medians, in that order): the winner stands
    only if the gate keeps it on these rounds too, else the baseline is chosen.

    Why: the winner is the lowest median of up to five contenders, so the rounds that picked it
    are the luckiest of several draws, and the chance read on them is not the chance it names.
    Rounds taken after the pick are not selected. How often it matters was measured, not assumed:
    with every finalist the same config, the first rounds kept one in 1 of 120 trials on the Zen 3
    (performance.md, section 81), so this guards a rare false keep; the README main job kept a
    config of the default's speed or slower in each of three runs before it (round medians 0.97,
    0.97 and 0.90; chances 0.028, 0.028 and 0.008), each read so in its bench table or a probe
    (sections 80-81)."""
    record = decide(fresh[0], fresh[1], fresh[2])
    return (settled if record.kept else dataclasses.replace(settled, chosen=baseline, switched=False)), record


def _finalists(
    bench: _Bench, sweep: Sweep, study: optuna.Study, opts: TuneOptions, incumbent: Tiling | None = None
) -> dict[str, object]:
    """Re-measure the best few, the default and the incumbent interleaved, decide what to freeze."""
    space = sweep.space
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    done = [t for t in complete if sweep.holds(t)]
    done.sort(key=lambda t: t.value)
    # The incumbent stands only on a checked trial of this sweep (phase one's lookup enqueued it at
    # the sweep's start): one that failed the reference check, or never ran, is not defended.
    held_trial = next((t.number for t in done if _config_from_params(space, t.params) == incumbent), None)
    held = [(incumbent, held_trial)] if incumbent not in (None, space.default) and held_trial is not None else []
    best: list[tuple[Tiling, int]] = []
    for t in done:
        config = _config_from_params(space, t.params)
        if config not in [c for c, _ in [*held, *best]] and config != space.default:
            best.append((config, t.number))
        if len(best) == opts.finalists:
            break
    contenders = [(space.default, -1), *held, *best]
    baseline = len(held)
    # the control: the baseline's config on an executor of its own, timed among the contenders, so
    # each round also reads two runs of one config (decide)
    executors = [bench.executor(c) for c, _ in contenders] + [bench.executor(contenders[baseline][0])]
    vendor = bench.case.baseline()
    vendor_run = lambda _: vendor(bench.g, bench.x, bench.t)  # noqa: E731
    runs = [bench.runner(ex) for ex in executors] + [vendor_run]
    # Launch by launch where the working set is out of every cache: at 2^24 the control's round
    # ratios spread 1.10-1.43x (median by case) run by run on the Zen 5 and 1.07-1.12x launch by
    # launch, and a 0.9x winner was kept in 4 of 6 tries against 6 of 6 (section 101).
    grain = _grain(bench, opts)
    # launch by launch, the copy between the launches as in the sweep's trials (_grain); not a contender
    between = [bench.copy] if grain is timing.Grain.LAUNCH else []
    load1 = [os.getloadavg()[0]]
    sched = timing.sched_times()
    timed = timing.interleaved(
        runs + between, bench.out.device, rounds=opts.rounds, min_time_s=opts.min_time_s, seed=opts.seed, grain=grain
    )
    summaries = [t.summary() for t in timed]
    medians = [t.median_s for t in timed]
    default_median = medians[0]
    n = len(contenders)
    settled = settle(medians[:n], [list(t.medians) for t in timed[:n]], baseline, list(timed[n].medians))
    confirmation: Verdict | None = None
    fresh_baseline: list[float] | None = None
    if settled.switched:
        # the pick, timed again in rounds that did not pick it (confirm): the baseline, the winner
        # and the control, in a shuffled order of their own
        again = [runs[baseline], runs[settled.winner], runs[n], *between]
        fresh = timing.interleaved(
            again, bench.out.device, rounds=opts.rounds, min_time_s=opts.min_time_s, seed=opts.seed + 1, grain=grain
        )
        settled, confirmation = confirm(settled, baseline, [list(t.medians) for t in fresh])
        fresh_baseline = list(fresh[0].medians)
    wait = timing.cpu_wait(sched, timing.sched_times())
    load1.append(os.getloadavg()[0])
    chosen, winner = settled.chosen, settled.winner
    cfg, trial_number = contenders[chosen]
    nbytes = bench.bytes()
    return {
        "config": cfg.to_dict(),
        "trial": trial_number,
        "tuned": chosen != 0,
        "baseline": "incumbent" if held else "default",
        "incumbent": held[0][0].to_dict() if held else None,
        "switched": settled.switched,
        "median_s": medians[chosen],
        "p20_s": summaries[chosen].p20_s,
        "p80_s": summaries[chosen].p80_s,
        "default_median_s": default_median,
        "vendor_median_s": medians[n + 1],
        "best_candidate": contenders[winner][0].to_dict(),
        # what the rounds timed: the default, the incumbent where the table had one, then the best
        # trials (TuneOptions.finalists), in that order
        "finalists": [c.to_dict() for c, _ in contenders],
        # how their rounds took their samples (timing.Grain); decisions before it have none: "run"
        "grain": grain.value,
        # whether the size-matched copy ran between the launches, the sweep's and the rounds' (_grain)
        "copy_between": bool(between),
        "best_candidate_gain": 1.0 - medians[winner] / default_median,
        "noise": settled.noise,
        # kept so that another gate can be replayed on the journal's decisions (performance.md,
        # section 73: one slow round vetoes a winner on a noisy host); over the baseline
        "round_ratios": settled.ratios,
        # the control's rounds over the baseline, and the chance the gate read off both (decide)
        "control_ratios": settled.control,
        "chance": settled.chance,
        # the fresh rounds a kept winner was timed in again, and whether it stood there (confirm);
        # None where the first rounds kept the baseline and nothing was timed again
        "confirmed": None if confirmation is None else confirmation.kept,
        "confirm_ratios": None if confirmation is None else confirmation.ratios,
        "confirm_control_ratios": None if confirmation is None else confirmation.control,
        "confirm_chance": None if confirmation is None else confirmation.chance,
        # the baseline's own round medians (s), first rounds and fresh: the ratios cancel the host's
        # speed, these keep it, and it moves (a 2^24 default read 6.6-8.7 ms from one block of rounds
        # to the next; streamed stores gained in the slower blocks and tied in the fast: section 82)
        "baseline_rounds_s": list(timed[baseline].medians),
        "confirm_baseline_rounds_s": fresh_baseline,
        "speedup_vs_default": default_median / medians[chosen],
        "speedup_vs_vendor": medians[n + 1] / medians[chosen],
        # the CPU loop switches this decision's rounds ran under ("" for none): tuner.freeze never
        # writes one taken under any into a table
        "cpu_forced": sweep.forced,
        "bytes": nbytes,
        "gbps": nbytes / medians[chosen] / 1e9,
        # the host's 1-minute load average as the finalists started and ended, and its CPUs: what
        # explains a decision taken on a busy host (busy_host)
        "load1": load1,
        "cpus": os.cpu_count() or 1,
        # the share of the finalists' runnable time the tuner's threads waited for a CPU (None where
        # the OS does not say): the contention itself, read over the rounds (busy_host)
        "cpu_wait": wait,
    }


def held(final: dict[str, object]) -> bool:
    """Whether a decision kept the table's incumbent because no contender beat it past the gate
    (settle): what ``show`` calls ``incumbent`` and ``freeze`` marks ``"held"``."""
    return final.get("baseline") == "incumbent" and not final.get("switched")


def busy_host(final: dict[str, object]) -> bool:
    """Whether a decision's finalists ran on a host whose CPUs other work wanted: the tuner's threads
    waited for a CPU timing.BUSY_WAIT of their runnable time or more (``cpu_wait``, read over the rounds),
    or the 1-minute load was a runnable thread more than the host has CPUs, beyond the tuner's own.
    Then its rounds time the contention, not the kernels: beside a two-worker test run on 2 cores,
    every 2-thread launch at 2^16 waited out a scheduler slice (8 ms medians against 26 us alone)
    and a one-thread config won each round by 290x (performance.md, section 74). The load alone
    lags: it still read quiet a minute into a job that had taken a core (section 76). Decisions
    from before either was recorded are not busy."""
    wait = recorded_wait(final.get("cpu_wait"))
    if wait is not None and wait >= timing.BUSY_WAIT:
        return True
    load1 = final.get("load1")
    cpus = final.get("cpus")
    if not isinstance(load1, list) or not load1 or not isinstance(cpus, int):
        return False
    return max(float(v) for v in load1) >= cpus + 1


def busy_reading(final: dict[str, object]) -> str:
    """What made a decision busy_host, for a warning: the 1-minute load and the CPU wait."""
    load1 = final.get("load1")
    load = "-".join(f"{float(v):.1f}" for v in load1) if isinstance(load1, list) and load1 else "?"
    wait = recorded_wait(final.get("cpu_wait"))
    waited = "(not recorded)" if wait is None else f"{wait:.0%}"
    return f"1-minute load {load} on {final.get('cpus', '?')} CPUs; waited for a CPU {waited} of its run"


def tune_case(case: Case, opts: TuneOptions, progress: Callable[[], None] | None = None) -> StudyResult:
    """Run (or resume) the study of one case, re-measure the finalists and record the decision."""
    bench = _Bench.make(case, opts.backend)
    base = bench.executor(None)
    space = base.space
    name = opts.study_name or name_for(case, bench, opts.backend)
    storage = open_storage(opts.storage)
    study = optuna.create_study(
        study_name=name, storage=storage, sampler=_sampler(opts, space), direction="minimize", load_if_exists=True
    )
    meta = {
        "backend": opts.backend,
        "device": base.device,
        "op": case.op.value,
        "dtype": base.key.dtype,
        "bucket": base.key.bucket,
        "grad_kind": base.key.grad_kind.value,
        "layout": base.key.layout.value,
        "reduction_kind": base.key.reduction_kind,
        "log_target": case.log_target,
        "space_hash": space.hash,
        "case": case.label(),
        "numel": case.numel,
    }
    for k, v in meta.items():
        study.set_user_attr(k, v)
    if opts.resweep:  # the trials so far, finished, running or queued, are history from here on
        study.set_user_attr("sweep_from", len(study.get_trials(deepcopy=False)))
    grid = _is_grid(opts, space)
    start = [space.default]
    if base.config_source.startswith("frozen"):  # phase one's own lookup: every table the device reads
        start.append(base.config)
    start += [c for c in space.seeds if c in space and c not in start]  # the backend's starting points
    if grid:
        rest = [c for c in space if c not in start]
        random.Random(opts.seed).shuffle(rest)
        start += rest
    sweep = Sweep.of(study, space, opts.backend, case.op.value, _timed(bench, opts))
    if not sweep.untagged:  # once set aside, for good: this sweep's decision will be today's kernel's
        study.set_user_attr("untagged_history", True)
    if "untagged_timed" not in study.user_attrs:  # read off the decision this sweep will replace
        study.set_user_attr("untagged_timed", sweep.untagged_timed.value)
    _reclaim_interrupted(study)
    _supersede_waiting(study, sweep)
    _enqueue_once(study, sweep, start)
    budget = opts.trials if opts.trials is not None else (space.size if grid else SAMPLED_TRIALS)
    # TPE and random draw each knob on its own, so some draws break a constraint; those cost no
    # measurement and do not spend the budget, but a sampler stuck on them must still end.
    # A grid's budget is its points, so a point measured twice (by a tuner before _of_space) is one.
    attempts = max(0, budget - _measured(study, sweep, grid)) * UNMEASURED_DRAWS
    if grid and opts.trials is None:  # run exactly the enqueued points, never a random extra
        attempts = len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,)))

    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    history = sum(1 for t in complete if _of_space(t, space) and not sweep.holds(t))
    if history and attempts:  # a kernel edit costs the whole sweep: say why this resume measures again
        why = "other loops or timing, or --resweep"
        log.warning("%s: %d trials of earlier sweeps (%s) kept as history", name, history, why)

    def at_budget(s: optuna.Study, t: optuna.trial.FrozenTrial) -> None:
        # The budget is the study's, shared by every worker on it (optuna's MaxTrialsCallback pattern).
        if _measured(s, sweep, grid) >= budget:
            s.stop()

    callbacks = [at_budget, *([lambda s, t: progress()] if progress else [])]
    if attempts:
        study.optimize(
            _objective(bench, sweep, opts),
            n_trials=attempts,
            timeout=opts.timeout_s,
            catch=(TrialFailure,),
            callbacks=callbacks,
            gc_after_trial=False,
        )
    incumbent = base.config if frozen.is_exact(base.config_source) else None  # what --freeze would replace
    final = _finalists(bench, sweep, study, opts, incumbent)
    final["kernel_hash"] = sweep.kernel
    # What the decision was measured at: freeze writes it, not its own commit and packages. Outside
    # a git checkout (a device machine's copy of the tree) no commit is known: none is recorded,
    # and freeze treats the decision as one from before decisions recorded theirs.
    final["versions"] = versions()
    commit = git_commit()
    if commit != "unknown":
        final["git_commit"] = commit
    if sweep.same:  # the finalists ranked on trials of those kernels too: they keep counting
        final["same_kernels"] = sorted(sweep.same)
    study.set_user_attr("final", final)
    if busy_host(final):
        log.warning(
            "%s: decided on a busy host (%s): its rounds time the contention, "
            "not the kernels; tune it again on a quiet host before freezing",
            name,
            busy_reading(final),
        )
    trials = study.get_trials(deepcopy=False)
    failures = {k: sum(1 for t in trials if t.user_attrs.get("failure") == k) for k in FAILURE_KINDS}
    return StudyResult(name, case, len(trials), {k: v for k, v in failures.items() if v}, final)


def _measured(study: optuna.Study, sweep: Sweep, distinct: bool = False) -> int:
    """Finished trials of ``sweep`` that spent budget (none of FREE_FAILURES); ``distinct``: their
    distinct points."""
    spent = _points(study.get_trials(deepcopy=False), sweep, finished=True, free=FREE_FAILURES)
    return len({tuple(sorted(p.items())) for p in spent}) if distinct else len(spent)


def _is_grid(opts: TuneOptions, space: Space) -> bool:
    return opts.sampler == "grid" or (opts.sampler == "auto" and space.size <= SMALL_SPACE)


def study_rows(storage_url: str | None) -> list[dict[str, object]]:
    """Every study in storage with its metadata and final decision (for show and freeze): a journal
    file must exist, a reader never creates one."""
    storage = open_storage(storage_url, create=False)
    rows = []
    for summary in optuna.get_all_study_summaries(storage, include_best_trial=False):
        attrs = summary.user_attrs
        rows.append({"study": summary.study_name, "trials": summary.n_trials, **attrs})
    return rows
