"""Measured calibration of the change-point detector (dashboards/changepoints.py) on this machine.

Method
------
*A/A data.* One commit measured ``n_points`` times, each point an independent measurement the way
asv makes one: a fresh Python process (new interpreter, new numba compile, new allocations) that
times every case once with the shared ``kernels.timing.measure`` and prints JSON. The kernels come
from ``git archive HEAD`` into a temporary directory, snapshotted once: the working tree is shared,
and an edit to kernels/ mid-collection would quietly turn A/A into A/B. Cases: the three loss
backwards on the CPU backend, float32, 2**16 and 2**22 elements, reduction "none" (full-shape
gradient) and "mean" (0-d gradient). Every series is "no change": anything the detector reports on
it is a false positive, and its scatter is this host's real noise (process-to-process variation,
a shared 2-core machine, other jobs running now and then; the load average is kept per point).

*False positives.* ``detect`` on each full A/A series in measurement order (the honest number:
bursts of load stay where they happened), on random contiguous windows of them (more, correlated,
trials), and on shuffled copies (order destroyed). Reported as the fraction of series with at
least one change point and as change points per 100 points.

*Detection.* Take an A/A series (alternately a random contiguous window or a random reordering,
from a fixed seed), multiply everything from a random position (at least ``MARGIN`` points from
either end) by ``1 + step`` (a regression) or divide it by ``1 + step`` (an improvement), and run
``detect``. A trial counts as detected when a change point with the right direction lies within
+-1 index of the injected position, or its commit range (widened by skipped runs) contains it.
Location accuracy is the share of those at the exact index; "extra" counts the other change points
reported in the same trials; the ratio error compares the reported ratio with the injected one.
Every trial is scored with the runs' spreads (as the dashboard does) and without, and (same
trials) with the detector's gross-run dropping switched off, to show what each part buys.

``python -m dashboards.calibrate --collect --evaluate`` writes ``results/regressions/``:
``aa_series.csv`` (+ ``aa_series.meta.json``: machine, commit, date, wall time, load) and
``calibration.json``; ``--tag`` keeps another data set beside it, ``--window A:B`` scores a
sub-range of the points.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from dashboards import changepoints

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results" / "regressions"
CSV_NAME = "aa_series.csv"
META_NAME = "aa_series.meta.json"
JSON_NAME = "calibration.json"
OPS = ("mse", "l1", "kl_div")
DEFAULT_CASES = tuple(f"{op}/{n}/{red}" for op in OPS for n in (1 << 16, 1 << 22) for red in ("none", "mean"))
STEPS = (0.03, 0.05, 0.10, 0.20, 0.50)
MARGIN = 3  # injected steps keep this many points on each side: the detector's min_segment plus slack
MIN_WINDOW = 15  # shortest sub-window used as a trial series
CONSTRUCTIONS = ("window", "shuffled")


@dataclass(frozen=True)
class Case:
    """One benchmark series: op, element count, reduction (all float32 on the CPU backend)."""

    op: str
    n: int
    reduction: str

    @classmethod
    def parse(cls, name: str) -> Case:
        op, n, reduction = name.split("/")
        if op not in OPS or reduction not in ("none", "mean"):
            raise ValueError(f"unknown case {name!r}: want op/n/reduction with op in {OPS}")
        return cls(op, int(n), reduction)

    @property
    def name(self) -> str:
        return f"{self.op}/{self.n}/{self.reduction}"


# ---------------------------------------------------------------------------------------------
# Collection


def _runner(case: Case) -> Callable[[int], object]:
    """The timed call of one case; torch and kernels load here so importing this module stays light."""
    import torch

    import kernels

    torch.manual_seed(0)  # same inputs in every process: an A/A point differs only by the measurement
    x = torch.randn(case.n)
    # kl_div's target is a probability; l1/mse take any values.
    target = torch.rand(case.n) + 0.01 if case.op == "kl_div" else torch.randn(case.n)
    grad = torch.randn(case.n) if case.reduction == "none" else torch.randn(())
    if case.op == "mse":
        return lambda _: kernels.mse_loss_backward(grad, x, target, case.reduction, backend="cpu")
    if case.op == "l1":
        return lambda _: kernels.l1_loss_backward(grad, x, target, case.reduction, backend="cpu")
    return lambda _: kernels.kl_div_backward(grad, x, target, case.reduction, log_target=False, backend="cpu")


def measure_point(cases: Sequence[str], min_time_s: float) -> list[dict[str, object]]:
    """Time every case once in this process (what one ``--_point`` subprocess does)."""
    from kernels.timing import measure

    rows: list[dict[str, object]] = []
    for name in cases:
        timing = measure(_runner(Case.parse(name)), "cpu", sets=1, warmup=2, min_time_s=min_time_s, min_runs=5)
        rows.append(
            {
                "case": name,
                "median_s": timing.median_s,
                "spread": timing.spread,
                "p20_s": timing.p20_s,
                "p80_s": timing.p80_s,
                "runs": len(timing.samples),
            }
        )
    return rows


def _snapshot(dest: Path, revision: str | None) -> str:
    """Copy the code under measurement into ``dest``; returns where it came from.

    An A/A series is only "the same commit" if every point runs the same code, and the working
    tree is shared: someone editing kernels/ mid-collection would turn it into an A/B series. So
    the kernels come from ``git archive <revision>`` (or, with None, a copy of the working tree made
    once, up front); the harness (this package) is copied from the working tree, it only drives.
    """
    source = "working tree"
    if revision is not None:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", revision, "kernels"], cwd=ROOT, capture_output=True, timeout=60
        )
        if archive.returncode != 0:
            raise RuntimeError(f"git archive {revision} failed: {archive.stderr.decode(errors='replace')[-500:]}")
        # Our own repository's archive; the "data" filter (where this Python has it) is belt and braces.
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(dest, **safe)  # type: ignore[arg-type]
        source = _git("rev-parse", revision)
    else:
        shutil.copytree(ROOT / "kernels", dest / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "dashboards").mkdir()
    for name in ("__init__.py", "calibrate.py", "changepoints.py"):
        shutil.copy2(ROOT / "dashboards" / name, dest / "dashboards" / name)
    return source


def _run_point(code_dir: Path, cases: Sequence[str], min_time_s: float, timeout_s: float) -> list[dict[str, object]]:
    argv = [sys.executable, "-m", "dashboards.calibrate", "--_point", "--cases", ",".join(cases)]
    argv += ["--min-time-s", str(min_time_s)]
    # The snapshot first on the path: it shadows the editable install of the live working tree.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(code_dir), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.run(argv, cwd=code_dir, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"A/A point failed (rc {proc.returncode}):\n{proc.stderr[-2000:]}")
    # The last line is ours; anything before it is a library's chatter on stdout.
    return json.loads(proc.stdout.strip().splitlines()[-1])


def collect_aa(
    n_points: int = 30,
    cases: Sequence[str] = DEFAULT_CASES,
    *,
    min_time_s: float = 0.1,
    timeout_s: float = 300.0,
    revision: str | None = "HEAD",
    log: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """``n_points`` independent measurements of the same code, one fresh process each.

    The code is ``revision``'s kernels/ (None: the working tree as it is now), snapshotted once so
    concurrent edits cannot leak in; ``frame.attrs["source"]`` says which. Columns: point, case,
    median_s, spread, p20_s, p80_s, runs, wall_s (the point's process) and load1 (the host's
    1-minute load average when the point started).
    """
    for name in cases:
        Case.parse(name)  # fail before minutes of measuring, not after
    frames = []
    with tempfile.TemporaryDirectory(prefix="losstune-aa-") as tmp:
        source = _snapshot(Path(tmp), revision)
        for point in range(n_points):
            # The host is shared: the load when the point started is what explains an odd point later.
            load1 = os.getloadavg()[0]
            t0 = time.perf_counter()
            rows = _run_point(Path(tmp), cases, min_time_s, timeout_s)
            wall = time.perf_counter() - t0
            frames.append(pd.DataFrame(rows).assign(point=point, wall_s=wall, load1=load1))
            if log is not None:
                log(f"point {point + 1}/{n_points}: {wall:.1f} s")
    columns = ["point", "case", "median_s", "spread", "p20_s", "p80_s", "runs", "wall_s", "load1"]
    aa = pd.concat(frames, ignore_index=True)[columns]
    aa.attrs["source"] = source
    return aa


def _git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def machine_info() -> dict[str, object]:
    """What the numbers belong to: host, software, commit (and whether the tree had local edits)."""
    import numba
    import torch

    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numba": numba.__version__,
        "commit": _git("rev-parse", "HEAD"),
        "tree_modified": _git("status", "--porcelain", "--untracked-files=no") != "",
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------------------------------------
# Evaluation


@dataclass(frozen=True)
class Detector:
    """The detect() settings under calibration (the dashboard's defaults unless told otherwise)."""

    min_change: float = 0.02
    max_p: float = 0.01
    min_segment: int = 2
    gross: float | None = changepoints.GROSS

    def __call__(self, values: np.ndarray, spreads: np.ndarray | None) -> list[changepoints.ChangePoint]:
        return changepoints.detect(
            values,
            spreads,
            min_change=self.min_change,
            max_p=self.max_p,
            min_segment=self.min_segment,
            gross=self.gross,
        )


def series_of(aa: pd.DataFrame) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """case -> (medians, spreads) in measurement order."""
    out = {}
    for case, group in aa.sort_values("point").groupby("case", sort=True):
        spreads = group["spread"].to_numpy(float) if "spread" in group else np.full(len(group), np.nan)
        out[str(case)] = (group["median_s"].to_numpy(float), spreads)
    return out


def _window(rng: np.random.Generator, values: np.ndarray, spreads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = len(values)
    length = int(rng.integers(min(MIN_WINDOW, n), n + 1))
    start = int(rng.integers(0, n - length + 1))
    return values[start : start + length], spreads[start : start + length]


def _shuffle(rng: np.random.Generator, values: np.ndarray, spreads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = rng.permutation(len(values))
    return values[order], spreads[order]


def _rate(counts: list[int], points: int) -> dict[str, float | int]:
    return {
        "series": len(counts),
        "with_change_point": sum(c > 0 for c in counts),
        "fraction": sum(c > 0 for c in counts) / len(counts) if counts else math.nan,
        "per_100_points": 100.0 * sum(counts) / points if points else math.nan,
    }


def _false_positives(
    series: dict[str, tuple[np.ndarray, np.ndarray]], detector: Detector, trials: int, rng: np.random.Generator
) -> dict[str, object]:
    names = sorted(series)
    result: dict[str, object] = {}
    for use_spreads in (True, False):
        ordered = [detector(v, s if use_spreads else None) for v, s in series.values()]
        picks = [names[int(rng.integers(len(names)))] for _ in range(trials)]
        counts: dict[str, tuple[list[int], int]] = {}
        for label, make in (("windows", _window), ("shuffled", _shuffle)):
            sizes, points = [], 0
            for name in picks:
                v, s = make(rng, *series[name])
                sizes.append(len(detector(v, s if use_spreads else None)))
                points += len(v)
            counts[label] = (sizes, points)
        key = "with_spreads" if use_spreads else "values_only"
        result[key] = {
            "ordered": _rate([len(c) for c in ordered], sum(len(v) for v, _ in series.values())),
            **{label: _rate(sizes, points) for label, (sizes, points) in counts.items()},
        }
        if use_spreads:
            # Which real A/A series fooled the detector, and by how much: the false positives to look at.
            result["ordered_change_points"] = [
                {"case": name, "index": cp.index, "ratio": round(cp.ratio, 4), "confidence": round(cp.confidence, 4)}
                for name, cps in zip(series, ordered, strict=True)
                for cp in cps
            ]
    return result


@dataclass(frozen=True)
class _Trial:
    values: np.ndarray
    spreads: np.ndarray
    position: int
    regression: bool
    true_ratio: float
    construction: str  # "window" (measurement order kept) or "shuffled"


def _trial(
    rng: np.random.Generator, series: dict[str, tuple[np.ndarray, np.ndarray]], step: float, t: int
) -> _Trial | None:
    name = sorted(series)[int(rng.integers(len(series)))]
    construction = "window" if t % 2 == 0 else "shuffled"
    values, spreads = (_window if construction == "window" else _shuffle)(rng, *series[name])
    if len(values) < 2 * MARGIN + 1:
        return None
    position = int(rng.integers(MARGIN, len(values) - MARGIN + 1))
    regression = t % 4 < 2  # half regressions, half improvements, across both constructions
    factor = 1.0 + step if regression else 1.0 / (1.0 + step)
    values = values.copy()
    values[position:] *= factor
    return _Trial(values, spreads, position, regression, factor, construction)


def _score(trial: _Trial, found: list[changepoints.ChangePoint]) -> tuple[bool, int | None, int, float | None]:
    """(detected, location error, extra change points, relative ratio error) of one trial."""
    hits = [cp for cp in found if _near(cp, trial.position) and cp.regression == trial.regression]
    if not hits:
        return False, None, len(found), None
    best = min(hits, key=lambda cp: abs(cp.index - trial.position))
    return True, abs(best.index - trial.position), len(found) - 1, best.ratio / trial.true_ratio - 1.0


def _near(cp: changepoints.ChangePoint, position: int) -> bool:
    """Within +-1 index, or inside the commit range: skipped runs (failed, contended) widen the range
    the dashboard shows, and a bisect of that range finds the change."""
    first, last = cp.commit_range
    return abs(cp.index - position) <= 1 or first < position <= last


def _detection(
    series: dict[str, tuple[np.ndarray, np.ndarray]],
    detector: Detector,
    step: float,
    trials: int,
    rng: np.random.Generator,
) -> dict[str, object]:
    made = [t for t in (_trial(rng, series, step, i) for i in range(trials)) if t is not None]
    out: dict[str, object] = {"step": step, "trials": len(made)}
    for key, use_spreads in (("with_spreads", True), ("values_only", False)):
        scores = [_score(t, detector(t.values, t.spreads if use_spreads else None)) for t in made]
        found = [s for s in scores if s[0]]
        errors = [s[1] for s in found if s[1] is not None]
        ratio_errors = [abs(s[3]) for s in found if s[3] is not None]
        pairs = list(zip(made, scores, strict=True))
        by = {c: [s[0] for t, s in pairs if t.construction == c] for c in CONSTRUCTIONS}
        out[key] = {
            "detected": len(found) / len(made) if made else math.nan,
            **{f"detected_{c}": sum(hits) / len(hits) if hits else math.nan for c, hits in by.items()},
            "exact_location": (sum(e == 0 for e in errors) / len(errors)) if errors else math.nan,
            "mean_abs_location_error": float(np.mean(errors)) if errors else math.nan,
            "median_abs_ratio_error": float(np.median(ratio_errors)) if ratio_errors else math.nan,
            "extra_per_trial": sum(s[2] for s in scores) / len(scores) if scores else math.nan,
        }
    return out


def _noise(series: dict[str, tuple[np.ndarray, np.ndarray]]) -> list[dict[str, object]]:
    """Per case: level, process-to-process scatter of the medians, and the runs' own spread."""
    rows = []
    for name, (values, spreads) in series.items():
        ok = np.isfinite(values) & (values > 0)
        logs = np.log(values[ok])
        mad = float(np.median(np.abs(logs - np.median(logs)))) / 0.6745 if len(logs) else math.nan
        rows.append(
            {
                "case": name,
                "points": int(ok.sum()),
                "median_us": float(np.median(values[ok])) * 1e6 if ok.any() else math.nan,
                "point_sigma": mad,  # robust sd of log(median): relative scatter between processes
                "max_over_min": float(values[ok].max() / values[ok].min()) if ok.any() else math.nan,
                "median_spread": float(np.nanmedian(spreads)) if np.isfinite(spreads).any() else math.nan,
            }
        )
    return rows


def evaluate(
    aa: pd.DataFrame,
    steps: Sequence[float] = STEPS,
    trials: int = 400,
    seed: int = 0,
    *,
    detector: Detector | None = None,
    ablation: bool = True,
) -> dict[str, object]:
    """False-positive and detection rates of ``detect`` on A/A data (see the module docstring).

    With ``ablation`` the same trials (same seed) are also scored with gross-run dropping off, to
    show what skipping contended runs buys in detection and costs in false positives.
    """
    detector = detector or Detector()
    series = series_of(aa)
    if not series:
        raise ValueError("no A/A series to evaluate")
    report: dict[str, object] = {
        "detector": {
            "min_change": detector.min_change,
            "max_p": detector.max_p,
            "min_segment": detector.min_segment,
            "gross": detector.gross,
            "spread_floor": changepoints.SPREAD_FLOOR,
            "clip_sigma": changepoints.CLIP,
            "step_weight": changepoints.STEP_WEIGHT,
            "permutations": [changepoints.PERMUTATIONS, changepoints.MAX_PERMUTATIONS],
        },
        "data": {"cases": len(series), "points": int(max(len(v) for v, _ in series.values())), "seed": seed},
        "noise": _noise(series),
        **_rates(series, detector, steps, trials, seed),
    }
    if ablation and detector.gross is not None:
        report["without_gross_drop"] = _rates(series, replace(detector, gross=None), steps, trials, seed)
    return report


def _rates(
    series: dict[str, tuple[np.ndarray, np.ndarray]], detector: Detector, steps: Sequence[float], trials: int, seed: int
) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    return {
        "false_positives": _false_positives(series, detector, trials, rng),
        "detection": [_detection(series, detector, float(step), trials, rng) for step in steps],
    }


def format_table(report: dict[str, object]) -> str:
    """A few lines for the terminal: noise per case, false positives, detection per step."""
    lines = [f"{'case':<22}{'points':>7}{'median us':>11}{'sigma':>8}{'max/min':>9}{'spread':>8}"]
    for r in report["noise"]:  # type: ignore[union-attr]
        lines.append(
            f"{r['case']:<22}{r['points']:>7}{r['median_us']:>11.1f}{r['point_sigma']:>8.2%}"
            f"{r['max_over_min']:>9.3f}{r['median_spread']:>8.2%}"
        )
    lines.append("")
    lines.append(f"{'false positives':<22}{'ordered':>16}{'windows':>16}{'shuffled':>16}   (fraction, per 100 pts)")
    ablation = report.get("without_gross_drop")
    rows = [(key, report["false_positives"][key]) for key in ("with_spreads", "values_only")]  # type: ignore[index]
    if ablation:
        rows.append(("no gross drop", ablation["false_positives"]["with_spreads"]))  # type: ignore[index]
    for label, fp in rows:
        cells = "".join(
            f"{fp[k]['fraction']:>9.1%} {fp[k]['per_100_points']:>5.2f} " for k in ("ordered", "windows", "shuffled")
        )
        lines.append(f"{label:<22}{cells}")
    lines.append("")
    header = ("step", "trials", "detected", "in order", "shuffled", "exact loc", "extra/trial", "values only")
    lines.append("".join(f"{h:>12}" for h in header) + ("  no gross drop" if ablation else ""))
    plain = ablation["detection"] if ablation else [None] * len(report["detection"])  # type: ignore[index,arg-type]
    for d, a in zip(report["detection"], plain, strict=True):  # type: ignore[arg-type]
        w, v = d["with_spreads"], d["values_only"]
        cells = (w["detected"], w["detected_window"], w["detected_shuffled"], w["exact_location"])
        lines.append(
            f"{d['step']:>12.0%}{d['trials']:>12}"
            + "".join(f"{c:>12.1%}" for c in cells)
            + f"{w['extra_per_trial']:>12.3f}{v['detected']:>12.1%}"
            + (f"{a['with_spreads']['detected']:>15.1%}" if a else "")
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Files and CLI


def _json_default(value: object) -> object:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _dumps(obj: object) -> str:
    # NaN is not JSON: null is what a reader of the file can actually parse.
    clean = json.loads(json.dumps(obj, default=_json_default), parse_constant=lambda _: None)
    return json.dumps(clean, indent=2) + "\n"


def _paths(out_dir: Path, tag: str) -> tuple[Path, Path, Path]:
    """(csv, meta, json) of one data set; a tag keeps e.g. a run on a busy host beside a quiet one."""
    if not tag:
        return out_dir / CSV_NAME, out_dir / META_NAME, out_dir / JSON_NAME
    return out_dir / f"aa_series.{tag}.csv", out_dir / f"aa_series.{tag}.meta.json", out_dir / f"calibration.{tag}.json"


def _collect(args: argparse.Namespace) -> None:
    from tuner.freeze import write_atomic  # here, not at import: every A/A point process imports this module

    cases = args.cases.split(",") if args.cases else list(DEFAULT_CASES)
    info = machine_info()
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    revision = None if args.revision == "worktree" else args.revision
    aa = collect_aa(
        args.points, cases, min_time_s=args.min_time_s, revision=revision, log=lambda s: print(s, file=sys.stderr)
    )
    wall = time.perf_counter() - t0
    info |= {
        "measured_code": aa.attrs["source"],
        "points": args.points,
        "cases": cases,
        "min_time_s": args.min_time_s,
        "collection_wall_s": round(wall, 1),
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    csv_path, meta_path, _ = _paths(args.out_dir, args.tag)
    write_atomic(csv_path, aa.to_csv(index=False))
    write_atomic(meta_path, _dumps(info))
    print(f"collected {len(aa)} rows in {wall:.1f} s -> {csv_path}")


def _evaluate(args: argparse.Namespace) -> None:
    from tuner.freeze import write_atomic

    csv_path, meta_path, json_path = _paths(args.out_dir, args.tag)
    aa = pd.read_csv(csv_path)
    if args.window:
        # A sub-range of the points (say, a stretch where the host was quiet), saved on its own.
        first, last = (int(x) for x in args.window.split(":"))
        aa = aa[(aa["point"] >= first) & (aa["point"] < last)]
        json_path = json_path.with_name(f"{json_path.stem}.points-{first}-{last}.json")
    t0 = time.perf_counter()
    report = evaluate(aa, trials=args.trials, seed=args.seed)
    report["points_used"] = args.window or "all"
    report["evaluation_wall_s"] = round(time.perf_counter() - t0, 1)
    report["collection"] = json.loads(meta_path.read_text()) if meta_path.exists() else None
    write_atomic(json_path, _dumps(report))
    print(format_table(report))
    print(f"-> {json_path}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dashboards.calibrate", description=__doc__.split("\n")[0])
    parser.add_argument("--collect", action="store_true", help=f"measure A/A series into {CSV_NAME}")
    parser.add_argument("--evaluate", action="store_true", help=f"score the detector into {JSON_NAME}")
    parser.add_argument("--points", type=int, default=30, help="A/A points (fresh processes)")
    parser.add_argument("--cases", default="", help="comma-separated op/n/reduction (default: all 12)")
    parser.add_argument("--min-time-s", type=float, default=0.1, help="measure()'s minimum timed total per case")
    parser.add_argument("--revision", default="HEAD", help="git revision whose kernels/ to measure, or 'worktree'")
    parser.add_argument("--trials", type=int, default=400, help="trials per step size and per FP construction")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out-dir", type=Path, default=RESULTS)
    parser.add_argument("--window", default="", help="evaluate only points FIRST:LAST (LAST excluded)")
    parser.add_argument("--tag", default="", help="name a separate data set: aa_series.TAG.csv, calibration.TAG.json")
    parser.add_argument("--_point", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._point:
        # One A/A point: this process is the fresh one; the JSON line is read by _run_point.
        print(json.dumps(measure_point(args.cases.split(","), args.min_time_s)))
        return 0
    if not (args.collect or args.evaluate):
        parser.error("give --collect and/or --evaluate")
    if args.collect:
        _collect(args)
    if args.evaluate:
        _evaluate(args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
