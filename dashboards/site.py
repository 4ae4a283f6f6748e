"""The static dashboard: HTML pages with every figure and table inline, built from ``results/`` only.

Opens from ``file://`` (no network, no external script or font; figures are inline PNG, tables are
HTML, a few lines of inline JavaScript filter the tables) and through ``serve`` on 127.0.0.1.
The site is built in a temporary folder and swapped in whole, so a failed build leaves the previous
one intact.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

from dashboards import figures, loaders
from dashboards.regressions import find_changes

PAGES = (
    ("index.html", "Overview"),
    ("landscapes.html", "Landscapes"),
    ("convergence.html", "Convergence"),
    ("roofline.html", "Roofline"),
    ("trends.html", "Trends"),
    ("regressions.html", "Regressions"),
)

CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#222}
nav{background:#1d3557;padding:.6em 1em}nav a{color:#fff;margin-right:1.2em;text-decoration:none}
nav a.here{font-weight:bold;text-decoration:underline}
main{padding:1em 1.5em;max-width:1400px}section{margin-bottom:2em}
img{max-width:100%;border:1px solid #ddd}
table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
th{background:#eee;cursor:pointer}td.l,th.l{text-align:left}
.reg{color:#b00}.imp{color:#070}.muted{color:#777}.empty{color:#777;font-style:italic}
input.filter{margin:.4em 0;padding:3px;width:22em}
"""

JS = """
document.querySelectorAll('input.filter').forEach(function (box) {
  var table = document.getElementById(box.dataset.table);
  box.addEventListener('input', function () {
    var q = box.value.toLowerCase();
    table.querySelectorAll('tbody tr').forEach(function (tr) {
      tr.style.display = tr.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
    });
  });
});
var data = JSON.parse(document.getElementById('site-data').textContent);
document.querySelectorAll('[data-count]').forEach(function (el) {
  el.textContent = String(data.counts[el.dataset.count]);
});
document.body.dataset.ready = 'yes';
"""


@dataclass(frozen=True)
class SiteData:
    asv: pd.DataFrame
    trials: pd.DataFrame
    finals: pd.DataFrame
    frozen: pd.DataFrame
    changes: pd.DataFrame
    bench: pd.DataFrame
    calibration: dict

    @property
    def latest(self) -> pd.DataFrame:
        """The newest commit's rows, per machine."""
        if self.asv.empty:
            return self.asv
        newest = self.asv.groupby("machine")["order"].transform("max")
        return self.asv[self.asv["order"] == newest]


def collect(results: Path | str = "results", storage: str | None = None, repo: Path | str | None = ".") -> SiteData:
    results = Path(results)
    storage = storage or str(results / "tuning" / "journal.log")
    asv = loaders.load_asv(results / "asv", repo)
    calibration_file = results / "regressions" / "calibration.json"
    from tuner.study import shared_journals  # optuna, where a build reads a journal

    with shared_journals():  # the trials and the finals from one replay of the journal
        trials, finals = loaders.load_tuning(storage), loaders.load_finals(storage)
    return SiteData(
        asv=asv,
        trials=trials,
        finals=finals,
        frozen=loaders.load_frozen(),
        changes=find_changes(asv),
        bench=loaders.load_bench(results / "bench"),
        calibration=json.loads(calibration_file.read_text()) if calibration_file.exists() else {},
    )


def _figure(fig: Figure | None, alt: str) -> str:
    if fig is None:
        return f'<p class="empty">No data for {html.escape(alt)} yet.</p>'
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'


def _table(frame: pd.DataFrame, table_id: str, columns: list[str] | None = None, fmt: dict | None = None) -> str:
    if frame.empty:
        return '<p class="empty">No rows.</p>'
    columns = [c for c in (columns or list(frame.columns)) if c in frame.columns]
    fmt = fmt or {}
    head = "".join(f'<th class="{"l" if frame[c].dtype == object else ""}">{html.escape(c)}</th>' for c in columns)
    body = []
    for _, row in frame[columns].iterrows():
        cells = []
        for c in columns:
            v = row[c]
            if v is None or (isinstance(v, float) and pd.isna(v)):
                text = ""
            else:
                text = fmt[c](v) if c in fmt else str(v)
            cells.append(f'<td class="{"l" if isinstance(v, str) else ""}">{html.escape(text)}</td>')
        body.append("<tr>" + "".join(cells) + "</tr>")
    box = f'<input class="filter" data-table="{table_id}" placeholder="filter rows">'
    return f'{box}<table id="{table_id}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def _tables_by_machine(frame: pd.DataFrame, table_id: str) -> str:
    """One folded table per machine, its row count and commits in the fold's line: four hosts' full
    reports are over a thousand rows, a page no one reads whole (and whose full-page screenshot
    outran the browser test's 30 s on a 2-core host once the H200's report joined the CPUs')."""
    if frame.empty or "machine" not in frame.columns:
        return _table(frame, table_id)
    parts = []
    for i, (machine, rows) in enumerate(frame.groupby("machine", sort=False)):
        commits = ", ".join(sorted({str(c) for c in rows.get("commit", pd.Series(dtype=object)).dropna()}))
        line = f"{machine}: {len(rows)} rows" + (f", commit {commits}" if commits else "")
        parts.append(f"<details><summary>{html.escape(line)}</summary>{_table(rows, f'{table_id}-{i}')}</details>")
    return "".join(parts)


def _forced_column(frame: pd.DataFrame) -> list[str]:
    """["cpu_forced"] where a row of ``frame`` (a run, a change, a decision) was measured with CPU loop
    switches set, else nothing: a column of blanks on every page would say nothing."""
    forced = frame.get("cpu_forced")
    return ["cpu_forced"] if forced is not None and forced.fillna("").astype(bool).any() else []


def _run_groups(asv: pd.DataFrame) -> list[tuple[str, str]]:
    """The (machine, cpu_forced) pairs of asv's runs, each a history of its own (regressions.SERIES),
    the machine's own runs first."""
    if asv.empty or "machine" not in asv.columns:
        return []
    forced = asv["cpu_forced"] if "cpu_forced" in asv.columns else pd.Series("", index=asv.index)
    pairs = pd.DataFrame({"machine": asv["machine"], "cpu_forced": forced.fillna("")}).drop_duplicates()
    return sorted(pairs.itertuples(index=False, name=None), key=lambda p: (p[1] != "", p[0], p[1]))


def _trends_by_machine(asv: pd.DataFrame, changes: pd.DataFrame) -> str:
    """One trends figure per machine (and per set of CPU loop switches a run forced): a line across
    two machines' runs read the change of host as a step (section 117 of results/performance.md)."""
    groups = _run_groups(asv)
    if not groups:
        return _figure(None, "trends")
    parts = []
    for machine, forced in groups:
        mine = asv[(asv["machine"] == machine) & (asv.get("cpu_forced", "") == forced)]
        theirs = changes
        if not changes.empty:
            theirs = changes[(changes["machine"] == machine) & (changes["cpu_forced"].fillna("") == forced)]
        title = machine + (f", CPU loops forced by {forced}" if forced else "")
        parts.append(f"<h3>{html.escape(title)}</h3>{_figure(figures.trends(mine, theirs, title), f'trends {title}')}")
    return "".join(parts)


def _page(name: str, title: str, sections: list[tuple[str, str, str]], data: dict) -> str:
    nav = "".join(f'<a href="{file}" class="{"here" if file == name else ""}">{label}</a>' for file, label in PAGES)
    body = "".join(
        f'<section id="{sid}" data-section="{sid}"><h2>{html.escape(heading)}</h2>{content}</section>'
        for sid, heading, content in sections
    )
    payload = json.dumps(data).replace("</", "<\\/")
    return (
        # An empty inline icon: otherwise browsers ask the server for /favicon.ico (a 404 in the console).
        '<!doctype html><html lang=en><head><meta charset=utf-8><link rel="icon" href="data:,">'
        f"<title>losstune · {html.escape(title)}</title><style>{CSS}</style></head><body>"
        f"<nav>{nav}</nav><main><h1>{html.escape(title)}</h1>{body}</main>"
        f'<script type="application/json" id="site-data">{payload}</script><script>{JS}</script></body></html>'
    )


def _us(v: float) -> str:
    return f"{v * 1e6:.1f}"


def _pages(d: SiteData) -> dict[str, tuple[str, list[tuple[str, str, str]]]]:
    latest = d.latest
    machines = sorted(d.asv["machine"].unique()) if not d.asv.empty else []
    commits = d.asv.drop_duplicates("commit").sort_values("order") if not d.asv.empty else d.asv
    history = (
        f"{len(commits)} commits measured on {', '.join(machines)} "
        f"({commits['commit'].iloc[0][:8]} .. {commits['commit'].iloc[-1][:8]})"
        if len(commits)
        else "no asv results yet"
    )
    speed = pd.DataFrame()
    if not latest.empty:
        t = latest[latest["metric"] == "time"].pivot_table(
            index=["machine", "backend", "op", "dtype", "shape"], columns="config", values="value"
        )
        if {"tuned", "vendor"} <= set(t.columns):
            t["x vendor"] = t["vendor"] / t["tuned"]
        speed = t.reset_index()
    cal = d.calibration
    cal_text = (
        "<p>Detector calibration (results/regressions/calibration.json): "
        + html.escape(json.dumps(cal.get("summary", cal))[:600])
        + "</p>"
        if cal
        else '<p class="empty">No calibration file.</p>'
    )
    return {
        "index.html": (
            "Overview: best configs",
            [
                (
                    "history",
                    "History",
                    f"<p>{html.escape(history)}; change points found: "
                    f'<b data-count="changes"></b>, of them regressions: <b data-count="regressions"></b>.</p>',
                ),
                (
                    "best-configs",
                    "Best configs per op / dtype / bucket",
                    _figure(figures.best_configs(d.finals), "best configs"),
                ),
                (
                    "frozen",
                    "Frozen configs shipped in kernels/configs",
                    _table(
                        d.frozen,
                        "frozen-table",
                        [
                            "file",
                            "op",
                            "log_target",
                            "dtype",
                            "bucket",
                            "grad_kind",
                            "layout",
                            "config",
                            "tuned",
                            "median_s",
                            "speedup_vs_default",
                            "speedup_vs_vendor",
                            "git_commit",
                        ],
                        {
                            "median_s": _us,
                            "speedup_vs_default": "{:.2f}".format,
                            "speedup_vs_vendor": "{:.2f}".format,
                            "git_commit": lambda c: str(c)[:8],
                        },
                    ),
                ),
                (
                    "latest",
                    "Latest commit: tuned vs default vs vendor (µs)",
                    _table(
                        speed,
                        "latest-table",
                        None,
                        {"tuned": _us, "default": _us, "vendor": _us, "x vendor": "{:.2f}".format},
                    ),
                ),
            ],
        ),
        "landscapes.html": (
            "Tile x cores landscapes",
            [("landscapes", "Time relative to each study's best", _figure(figures.landscapes(d.trials), "landscapes"))],
        ),
        "convergence.html": (
            "Tuning convergence",
            [
                ("convergence", "Best so far vs trial", _figure(figures.convergence(d.trials), "convergence")),
                (
                    "studies",
                    "Studies and their decisions",
                    _table(
                        d.finals,
                        "studies-table",
                        [
                            "case",
                            *_forced_column(d.finals),
                            "trials",
                            "tuned",
                            "baseline",  # what the finalists had to beat: the default or the table's incumbent
                            "switched",
                            "tile",
                            "cores",
                            "variant",
                            "median_s",
                            "default_median_s",
                            "best_candidate",
                            "best_candidate_gain",
                            "noise",
                            "chance",  # the gate's: the winner's rounds against the control's (tuner.study.decide)
                            "confirmed",  # whether a kept winner stood in fresh rounds (tuner.study.confirm)
                        ],
                        {
                            "median_s": _us,
                            "default_median_s": _us,
                            "best_candidate_gain": "{:+.1%}".format,
                            "noise": "{:.1%}".format,
                            "chance": "{:.3f}".format,
                        },
                    ),
                ),
            ],
        ),
        "roofline.html": (
            "Roofline",
            [
                ("roofline", "Achieved bandwidth vs the copy probe", _figure(figures.roofline(latest), "roofline")),
                ("bench", "losstune bench --report, per machine", _tables_by_machine(d.bench, "bench-table")),
                (
                    "goals",
                    "Performance goals not met, per machine (losstune goals)",
                    _table(loaders.goal_misses(d.bench), "goals-table", fmt={"measured": "{:.2f}".format}),
                ),
            ],
        ),
        "trends.html": (
            "Trends",
            [
                (
                    "trends",
                    "Time per commit with spread and change points, per machine",
                    _trends_by_machine(d.asv, d.changes),
                )
            ],
        ),
        "regressions.html": (
            "Regressions",
            [
                (
                    "changes",
                    "Every change point (reverted ones too)",
                    _table(
                        d.changes,
                        "changes-table",
                        [
                            "machine",
                            *_forced_column(d.changes),
                            "backend",
                            "op",
                            "dtype",
                            "shape",
                            "config",
                            "commit_before",
                            "commit_after",
                            "before",
                            "after",
                            "size_pct",
                            "confidence",
                            "regression",
                            "status",
                        ],
                        {
                            "commit_before": lambda c: str(c)[:8],
                            "commit_after": lambda c: str(c)[:8],
                            "before": _us,
                            "after": _us,
                            "size_pct": "{:+.1f}%".format,
                            "confidence": "{:.3f}".format,
                        },
                    ),
                ),
                ("calibration", "How far to trust it", cal_text),
            ],
        ),
    }


def build(
    out: Path | str = "results/dashboard",
    results: Path | str = "results",
    storage: str | None = None,
    repo: Path | str | None = ".",
) -> list[Path]:
    """Write the site; returns the pages written. The previous site is replaced only on success."""
    out = Path(out)
    data = collect(results, storage, repo)
    counts = {
        "changes": len(data.changes),
        "regressions": int(data.changes["regression"].sum()) if not data.changes.empty else 0,
        "commits": int(data.asv["commit"].nunique()) if not data.asv.empty else 0,
    }
    payload = {"counts": counts, "built": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "sections": {}}
    out.parent.mkdir(parents=True, exist_ok=True)
    _sweep_leftovers(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    os.chmod(tmp, 0o755)  # mkdtemp makes it private; the site is served and shared
    try:
        for name, (title, sections) in _pages(data).items():
            payload["sections"] = [sid for sid, _, _ in sections]
            (tmp / name).write_text(_page(name, title, sections, payload), encoding="utf-8")
        (tmp / "data.json").write_text(json.dumps(counts, indent=1))
        # The old site moves to a name of this build's own (an empty folder a rename may replace):
        # one fixed name, left by a build killed between the renames, failed every later build.
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
        if out.exists():
            os.replace(out, old)
        os.replace(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [out / name for name, _ in PAGES]


# A build's folders beside the site live for its seconds; one older than this was left by a build
# killed by a signal no handler sees (SIGTERM, SIGKILL) and is removed by the next.
LEFTOVER_S = 3600.0


def _sweep_leftovers(out: Path) -> None:
    """The folders killed builds left beside ``out`` (``.<name>-*``, older than LEFTOVER_S)."""
    cutoff = time.time() - LEFTOVER_S
    for left in out.parent.glob(f".{out.name}-*"):
        try:
            if left.is_dir() and not left.is_symlink() and left.stat().st_mtime < cutoff:
                shutil.rmtree(left, ignore_errors=True)
        except OSError:
            continue


def serve(site: Path | str = "results/dashboard", host: str = "127.0.0.1", port: int = 8000) -> ThreadingHTTPServer:
    """A server for the built site (call ``serve_forever`` on it); loopback unless told otherwise."""
    site = Path(site)
    if not (site / "index.html").exists():
        raise FileNotFoundError(f"site: expected a built dashboard at {site}, run `losstune dashboard build` first")
    handler = partial(SimpleHTTPRequestHandler, directory=str(site))
    return ThreadingHTTPServer((host, port), handler)
