"""matplotlib figures over the tidy tables of :mod:`dashboards.loaders`.

Each function takes tables and returns a Figure (or None when there is nothing to draw), so the
site, a notebook and the tests use the same code. The Agg backend: no display is ever needed.
"""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

DTYPE_COLORS = {"float32": "tab:blue", "float16": "tab:orange", "bfloat16": "tab:green"}
CONFIG_STYLE = {"tuned": "-", "default": ":", "vendor": "--"}


def _grid(n: int, cols: int = 3, w: float = 4.2, h: float = 3.0) -> tuple[Figure, np.ndarray]:
    rows = max(1, math.ceil(n / cols))
    cols = min(cols, max(n, 1))
    fig, axes = plt.subplots(rows, cols, figsize=(w * cols, h * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def _completed(trials: pd.DataFrame) -> pd.DataFrame:
    """Trials of each study's latest sweep that finished with a time (failed and still-enqueued
    grid points have none; an earlier space's or kernel's trials are history, loaders._current_sweep)."""
    if trials.empty:
        return trials
    done = (trials["state"] == "COMPLETE") & trials["seconds"].notna()
    return trials[done & trials["current"]] if "current" in trials else trials[done]


def best_configs(finals: pd.DataFrame) -> Figure | None:
    """Per tuned case: the chosen config's speedup over the default and over the vendor baseline."""
    if finals.empty:
        return None
    data = finals.sort_values(["op", "dtype", "numel", "reduction_kind"]).reset_index(drop=True)
    labels = [
        f"{r.op}{'-log' if r.log_target else ''} {r.dtype} 2^{int(math.log2(max(r.numel, 1)))} {r.reduction_kind}"
        for r in data.itertuples()
    ]
    y = np.arange(len(data))
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(data) + 1.5))
    ax.barh(y - 0.2, data["speedup_vs_vendor"], height=0.4, label="vs vendor (torch eager)", color="tab:blue")
    ax.barh(y + 0.2, data["speedup_vs_default"], height=0.4, label="vs default config", color="tab:gray")
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_yticks(y, labels, fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("speedup of the frozen choice (median of interleaved rounds; >1 is faster)")
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Best configs per op / dtype / size bucket")
    fig.tight_layout()
    return fig


def landscapes(trials: pd.DataFrame, max_panels: int = 12) -> Figure | None:
    """tile x cores heatmaps of trial time relative to the study's best (1.0 = best)."""
    done = _completed(trials)
    if done.empty:
        return None
    studies = sorted(done["study"].unique())[:max_panels]
    fig, axes = _grid(len(studies), cols=3, w=4.4, h=3.2)
    for ax, study in zip(axes.flat, studies, strict=False):
        d = done[done["study"] == study]
        best = d["seconds"].min()
        table = d.groupby(["cores", "tile"])["seconds"].min().unstack("tile") / best
        im = ax.imshow(table.values, aspect="auto", cmap="viridis_r", vmin=1.0, vmax=max(1.5, float(np.nanmax(table))))
        ax.set_xticks(
            range(len(table.columns)),
            [f"{int(t) >> 10}K" if t >= 1024 else str(t) for t in table.columns],
            fontsize=7,
            rotation=45,
        )
        ax.set_yticks(range(len(table.index)), [str(c) for c in table.index], fontsize=7)
        ax.set_xlabel("tile (elements)", fontsize=8)
        ax.set_ylabel("cores", fontsize=8)
        ax.set_title(str(d["case"].iloc[0]) if "case" in d else study, fontsize=8)
        fig.colorbar(im, ax=ax, shrink=0.8).ax.tick_params(labelsize=7)
    fig.suptitle("Tuning landscapes: time / best time (lower is better)")
    fig.tight_layout()
    return fig


def convergence(trials: pd.DataFrame, max_panels: int = 12) -> Figure | None:
    """Best time found so far vs trial number, relative to the default's first measurement."""
    done = _completed(trials)
    if done.empty:
        return None
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for study in sorted(done["study"].unique())[:max_panels]:
        d = done[done["study"] == study].sort_values("trial")
        first = d["seconds"].iloc[0]  # trial 0 is the enqueued default
        best = d["seconds"].cummin() / first
        ax.plot(d["trial"], best, lw=1.2, label=str(d["case"].iloc[0]) if "case" in d else study)
    ax.set_xlabel("trial")
    ax.set_ylabel("best so far / default")
    ax.set_title("Tuning convergence (trial 0 is the default config)")
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def roofline(latest: pd.DataFrame) -> Figure | None:
    """% of the roofline per case at the latest commit: bytes the op must move / time, over the
    bandwidth of torch's copy at the same working set (measured in the same run)."""
    pct = latest[(latest["metric"] == "roofline") & latest["value"].notna()] if not latest.empty else latest
    if pct.empty:
        return None
    shapes = sorted(pct["shape"].unique())
    fig, axes = _grid(len(shapes), cols=len(shapes), w=5.0, h=4.0)
    for ax, shape in zip(axes.flat, shapes, strict=False):
        d = pct[pct["shape"] == shape]
        cases = sorted(d[["op", "dtype"]].drop_duplicates().itertuples(index=False))
        x = np.arange(len(cases))
        for k, config in enumerate(("tuned", "vendor")):
            vals = [
                d[(d["op"] == op) & (d["dtype"] == dt) & (d["config"] == config)]["value"].max() for op, dt in cases
            ]
            ax.bar(x + (k - 0.5) * 0.4, vals, width=0.4, label=config, color=("tab:blue", "tab:red")[k])
        ax.axhline(100, color="black", ls="--", lw=1, label="copy at same size")
        ax.set_xticks(x, [f"{op}\n{dt[:4]}" for op, dt in cases], fontsize=6)
        ax.set_ylabel("% of copy bandwidth", fontsize=8)
        ax.set_title(shape, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(f"Roofline at {latest['commit'].iloc[0][:8]} on {latest['machine'].iloc[0]}")
    fig.tight_layout()
    return fig


def trends(frame: pd.DataFrame, changes: pd.DataFrame | None = None, title: str = "") -> Figure | None:
    """Time per commit, one panel per op x shape: tuned (solid) and vendor (dashed) per dtype, the
    p20-p80 band of each point, and a red mark at every change point found in a tuned series.

    For one machine's runs (``title`` names it): a line joins the points of one series, so two
    machines' in one frame would read as one history with a step where the host changed
    (dashboards.site draws one figure per machine)."""
    t = frame[(frame["metric"] == "time")] if not frame.empty else frame
    if t.empty:
        return None
    panels = sorted(t[["op", "shape"]].drop_duplicates().itertuples(index=False))
    fig, axes = _grid(len(panels), cols=3, w=4.6, h=3.0)
    commits = t.drop_duplicates("order").sort_values("order")
    pos = {o: i for i, o in enumerate(commits["order"])}
    for ax, (op, shape) in zip(axes.flat, panels, strict=False):
        d = t[(t["op"] == op) & (t["shape"] == shape)]
        for (dtype, config), s in d.groupby(["dtype", "config"]):
            if config == "default":
                continue
            s = s.sort_values("order")
            x = s["order"].map(pos)
            ax.plot(
                x,
                s["value"] * 1e6,
                CONFIG_STYLE[config],
                color=DTYPE_COLORS.get(dtype),
                lw=1.1,
                marker=".",
                ms=3,
                label=f"{dtype} {config}",
            )
            if "p20" in s and s["p20"].notna().any():
                ax.fill_between(x, s["p20"] * 1e6, s["p80"] * 1e6, color=DTYPE_COLORS.get(dtype), alpha=0.2, lw=0)
        if changes is not None and not changes.empty:
            c = changes[(changes["op"] == op) & (changes["shape"] == shape) & (changes["config"] == "tuned")]
            for row in c.itertuples():
                ax.axvline(
                    pos.get(row.order_after, np.nan) - 0.5,
                    color="red" if row.regression else "green",
                    lw=0.8,
                    alpha=0.6,
                )
        ax.set_yscale("log")
        ax.set_title(f"{op} {shape}", fontsize=9)
        ax.set_ylabel("µs", fontsize=8)
        ax.set_xticks(range(len(commits)), [c[:7] for c in commits["commit"]], rotation=90, fontsize=6)
    axes.flat[0].legend(fontsize=6, ncol=2)
    head = f"{title}: trends" if title else "Trends"
    fig.suptitle(f"{head} across commits (band: p20-p80; red/green line: regression/improvement)")
    fig.tight_layout()
    return fig
