"""Turn what is under ``results/`` into tidy pandas tables (one observation per row).

Sources: asv's result files (``results/asv/<machine>/*.json``, format version 2) with the meta files
the suite writes beside each run (``results/asv-meta/<machine>/<commit>.json``: p20/p80 and the
accelerator), the tuning storage (an optuna journal or RDB URL) and the frozen config tables.
Nothing here measures or writes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import warnings
from collections.abc import Callable
from pathlib import Path

import optuna
import pandas as pd

from kernels.backends import switch_tag
from tuner.goals import check_rows, evaluate

ASV_COLUMNS = ["machine", "cpu_forced", "env", "commit", "date", "benchmark", "metric", "unit"]
METRICS = {
    "track_time": "time",
    "track_bandwidth": "bandwidth",
    "track_roofline": "roofline",
    "track_roofline_paired": "roofline_paired",
}


def _git_order(repo: Path) -> dict[str, int]:
    """commit -> position in first-parent history (0 = oldest); empty outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-list", "--first-parent", "--reverse", "HEAD"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return {}
    return {c: i for i, c in enumerate(out)}


def load_asv(results_dir: Path | str = "results/asv", repo: Path | str | None = ".") -> pd.DataFrame:
    """Every value of every asv result file, one row per (run, benchmark, parameter combination).

    Columns: machine, cpu_forced (the CPU loop switches the run set, "" for none), env, commit, date
    (the commit's), order (position in history), benchmark, metric, unit, the benchmark's parameters
    by name, value (NaN where the benchmark failed or was skipped) and, from the meta files, p20/p80
    of time series, runs and the config used.
    """
    results_dir = Path(results_dir)
    rows: list[dict[str, object]] = []
    index_file = results_dir / "benchmarks.json"
    if not index_file.exists():
        return pd.DataFrame(columns=[*ASV_COLUMNS, "value", "order"])
    index = json.loads(index_file.read_text())
    for path in sorted(results_dir.glob("*/*.json")):
        if path.name == "machine.json":
            continue
        run = json.loads(path.read_text())
        columns = run.get("result_columns", ["result", "params"])
        meta = _load_meta(results_dir.parent / "asv-meta" / path.parent.name / f"{run['commit_hash']}.json")
        measured = meta.get("results", {})
        accelerators = ", ".join(meta.get("host", {}).get("accelerators", [])) or "none"
        # the CPU loop switches the run had set (tuner.machine.describe), "" for none or a run from
        # before they were stored: a run with any set measured loops the host does not run by default
        forced = switch_tag(meta.get("host", {}).get("cpu_forced") or {})
        for name, packed in run.get("results", {}).items():
            bench = index.get(name)
            if bench is None or not name.rsplit(".", 1)[-1].startswith("track_"):
                continue
            record = dict(zip(columns, packed, strict=False))
            values = record.get("result") or []
            param_lists = record.get("params") or bench.get("params") or []
            metric = METRICS.get(name.rsplit(".", 1)[-1], name.rsplit(".", 1)[-1])
            for combo, value in zip(itertools.product(*param_lists), values, strict=False):
                params = {n: _unquote(v) for n, v in zip(bench["param_names"], combo, strict=True)}
                row: dict[str, object] = {
                    "machine": path.parent.name,
                    "cpu_forced": forced,
                    "env": run.get("env_name", ""),
                    "commit": run["commit_hash"],
                    "date": pd.to_datetime(run.get("date", 0), unit="ms", utc=True),
                    "benchmark": name,
                    "metric": metric,
                    "unit": bench.get("unit", ""),
                    **params,
                    "value": float("nan") if value is None else float(value),
                }
                extra = measured.get("|".join(str(params[k]) for k in bench["param_names"]))
                if meta:
                    row["accelerators"] = accelerators
                    backend_meta = meta.get("backends", {}).get(params.get("backend"), {})
                    row["copy_gbps"] = backend_meta.get("copy_gbps")  # suites before the size-matched roofline
                if extra:
                    row["config_used"] = extra.get("config")
                    row["copy_gbps"] = extra.get("roofline_gbps", row.get("copy_gbps"))
                    if metric == "time":
                        row["p20"] = extra.get("p20_s")
                        row["p80"] = extra.get("p80_s")
                        row["runs"] = extra.get("runs")
                rows.append(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return pd.DataFrame(columns=[*ASV_COLUMNS, "value", "order"])
    order = _git_order(Path(repo)) if repo is not None else {}
    # Commits not in this checkout's history (another branch) sort by date after the known ones.
    by_date = frame.drop_duplicates("commit").sort_values("date")["commit"].tolist()
    fallback = {c: len(order) + i for i, c in enumerate(by_date)}
    frame["order"] = frame["commit"].map(lambda c: order.get(c, fallback[c]))
    return frame.sort_values(["order", "benchmark"]).reset_index(drop=True)


def _unquote(value: object) -> object:
    """asv stores parameter values as their repr: "'cpu'" -> cpu."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _load_meta(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def series_key(row: pd.Series | dict) -> str:
    return " ".join(str(row[k]) for k in ("machine", "backend", "op", "dtype", "shape", "config", "metric"))


def _absent(storage: str | None) -> bool:
    """A journal path that does not exist yet: nothing tuned, an empty table (not a new empty file)."""
    return bool(storage) and "://" not in str(storage) and not Path(str(storage)).exists()


def _current_sweep(trials: list[optuna.trial.FrozenTrial], attrs: dict) -> Callable[[optuna.trial.FrozenTrial], bool]:
    """Whether a trial belongs to the study's latest sweep (tuner.study.Sweep, read from the study's
    attributes ``attrs`` without building the space or hashing today's kernel): a study is named by
    its case, so a grown space or an edited kernel resumes it, and the trials of the older space or
    loops, measured sessions before, are history the figures leave out.

    A trial carries its space's hash; one from before the tag belongs if it has the knobs the tagged
    ones have (a study with no tagged trial is all of one sweep, as far as can be told). It carries
    its kernel's hash too: the latest sweep's kernels are those of the study's decision (its hash and
    the ones restamp carried it across), unless a later trial's kernel is none of them (a sweep on
    new loops under way): then that kernel's alone. A trial from before the kernel tag belongs with
    the decision's kernels, unless a sweep has set such trials aside (``untagged_history``). None
    before ``sweep_from`` (``tune --resweep``) belongs. A finished trial carries how it was timed
    (``timed``; one from before the tag as tuner.study.untagged_timing reads the study): the latest
    finished trial's clock is the sweep's, and a finished trial on another clock is history, as
    Sweep.holds has it."""
    from tuner.study import untagged_timing  # here, as load_tuning's: the figures' import stays light

    space_hash, final, first = attrs.get("space_hash"), attrs.get("final"), int(attrs.get("sweep_from", 0))
    knobs = {frozenset(t.params) for t in trials if t.params and t.user_attrs.get("space_hash") == space_hash}
    tagged = [
        t.user_attrs["kernel_hash"] for t in sorted(trials, key=lambda t: t.number) if t.user_attrs.get("kernel_hash")
    ]
    kernels = {final.get("kernel_hash"), *final.get("same_kernels", ())} if isinstance(final, dict) else set()
    untagged = not attrs.get("untagged_history")
    if tagged and tagged[-1] not in kernels:
        kernels, untagged = {tagged[-1]}, untagged and not isinstance(final, dict)  # a stale decision: theirs
    before = untagged_timing(attrs).value
    done = sorted((t for t in trials if t.state == optuna.trial.TrialState.COMPLETE), key=lambda t: t.number)
    clock = done[-1].user_attrs.get("timed", before) if done else before

    def of_space(t: optuna.trial.FrozenTrial) -> bool:
        tag = t.user_attrs.get("space_hash")
        if tag is not None or space_hash is None:
            return tag == space_hash
        return not knobs or frozenset(t.params) in knobs

    def current(t: optuna.trial.FrozenTrial) -> bool:
        tag = t.user_attrs.get("kernel_hash")
        if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs.get("timed", before) != clock:
            return False
        return t.number >= first and of_space(t) and (untagged if tag is None else tag in kernels)

    return current


def load_tuning(storage: str | None = "results/tuning/journal.log") -> pd.DataFrame:
    """Every trial of every study: the study's case, the trial's config, timing and failure kind."""
    from tuner.study import open_storage

    if _absent(storage):
        return pd.DataFrame()
    store = open_storage(storage, create=False)  # a reader: a cut-off last record is warned of, not refused
    rows: list[dict[str, object]] = []
    for summary in optuna.get_all_study_summaries(store, include_best_trial=False):
        study = optuna.load_study(study_name=summary.study_name, storage=store)
        attrs = {k: v for k, v in summary.user_attrs.items() if k != "final"}
        trials = study.get_trials(deepcopy=False)
        current = _current_sweep(trials, summary.user_attrs)
        for t in trials:
            config = t.user_attrs.get("config") or {}
            timing = t.user_attrs.get("timing") or {}
            rows.append(
                {
                    "study": summary.study_name,
                    **attrs,
                    "trial": t.number,
                    "state": t.state.name,
                    "failure": t.user_attrs.get("failure"),
                    "current": current(t),
                    **{k: t.params.get(k, config.get(k)) for k in ("tile", "cores", "variant")},
                    "seconds": t.value if t.value is not None else float("nan"),
                    "p20": timing.get("p20_s"),
                    "p80": timing.get("p80_s"),
                    "completed": t.datetime_complete,
                }
            )
    return pd.DataFrame(rows)


def load_finals(storage: str | None = "results/tuning/journal.log") -> pd.DataFrame:
    """One row per study: its case and the finalists' decision (chosen config, gains, noise)."""
    from tuner.study import study_rows

    if _absent(storage):
        return pd.DataFrame()
    rows = []
    for row in study_rows(storage):
        final = row.pop("final", None)
        if not final:
            continue
        config = final.get("config", {})
        rows.append(
            {
                **row,
                **{k: v for k, v in final.items() if not isinstance(v, dict)},
                "tile": config.get("tile"),
                "cores": config.get("cores"),
                "variant": config.get("variant"),
                "best_candidate": _short(final.get("best_candidate", {})),
            }
        )
    return pd.DataFrame(rows)


def _short(config: dict) -> str:
    return f"{config.get('variant')} tile {config.get('tile')} x{config.get('cores')}" if config else ""


def load_frozen(config_dir: Path | str | None = None) -> pd.DataFrame:
    """The shipped frozen tables, one row per entry, with the file they came from."""
    from kernels import frozen

    root = Path(config_dir) if config_dir is not None else frozen.CONFIG_DIR
    rows = []
    for path in sorted(root.glob("*/*.json")):
        table = json.loads(path.read_text())
        for entry in table.get("entries", []):
            config = entry.get("config", {})
            rows.append(
                {
                    "file": f"{path.parent.name}/{path.name}",
                    "backend": table.get("backend"),
                    "device": table.get("device"),
                    **{k: v for k, v in entry.items() if not isinstance(v, dict)},
                    "config": _short(config),
                }
            )
    return pd.DataFrame(rows)


def load_bench(path: Path | str = "results/bench") -> pd.DataFrame:
    """The committed ``losstune bench --report`` rows (empty when absent), machine and commit first.

    ``path``: one report.json, or a folder of them, one per machine (``results/bench/<machine>/``):
    hosts of one class name may differ in vector tier, and each report is only read against itself.
    """
    path = Path(path)
    folder = path.is_dir()
    files = sorted(path.glob("*/report.json")) if folder else [path] if path.exists() else []
    frames = []
    for file in files:
        data = json.loads(file.read_text())
        meta = data if isinstance(data, dict) else {}
        rows = pd.DataFrame(data["rows"] if isinstance(data, dict) else data)
        rows.insert(0, "commit", meta.get("commit", ""))
        # The folder names the machine (a report measured before the name carried the vector tier
        # says only x86_64-2t-cpu-only inside); a lone file says it itself.
        rows.insert(0, "machine", file.parent.name if folder else meta.get("host", {}).get("machine", ""))
        frames.append(rows)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def goal_misses(bench: pd.DataFrame) -> pd.DataFrame:
    """Every performance goal a machine's bench report misses (tuner.goals), machine first; empty
    when there is no report. A report without the fields the goals read is left out, with a warning."""
    columns = ["machine", "commit", "op", "dtype", "what", "measured", "goal", "detail"]
    if bench.empty:
        return pd.DataFrame(columns=columns)
    rows = []
    for (machine, commit), report in bench.groupby(["machine", "commit"], sort=False):
        records = report.to_dict("records")
        try:
            check_rows(records)
        except ValueError as e:
            warnings.warn(f"bench report of {machine} at {commit}: {e}; no goals read", stacklevel=2)
            continue
        for miss in evaluate(records)[1]:
            rows.append({"machine": machine, "commit": commit, **dataclasses.asdict(miss)})
    return pd.DataFrame(rows, columns=columns)
