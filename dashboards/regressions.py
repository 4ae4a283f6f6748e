"""Every change point in every asv series, with its commit range, size, confidence and status.

asv's own regressions page keeps only the latest step of a series; a regression that was fixed two
commits later disappears from it. Here every step is listed, and a step is marked "reverted" when
a later step in the same series brings the level back within the step's own size.
"""

from __future__ import annotations

import pandas as pd

from dashboards.changepoints import detect

# A run with CPU loop switches set (cpu_forced) measured other loops than the machine's own: its
# points are a series of their own, never a step in the machine's.
SERIES = ["machine", "cpu_forced", "backend", "op", "dtype", "shape", "config"]
COLUMNS = [
    *SERIES,
    "metric",
    "commit_before",
    "commit_after",
    "order_before",
    "order_after",
    "before",
    "after",
    "ratio",
    "size_pct",
    "confidence",
    "regression",
    "status",
]


def find_changes(frame: pd.DataFrame, *, metric: str = "time", **detect_kw: object) -> pd.DataFrame:
    """Run the detector over every (machine, cpu_forced, backend, op, dtype, shape, config) series of
    ``metric``.

    Points are commits in history order; the p20-p80 spread of each point (from the meta files)
    is the detector's noise floor. The commit range of a change is (commit_before, commit_after]:
    the last measured commit at the old level and the first at the new one, so commits between
    them that failed or were not measured are inside the range.
    """
    if frame.empty or "metric" not in frame:
        return pd.DataFrame(columns=COLUMNS)
    data = frame[frame["metric"] == metric]
    keys = [k for k in SERIES if k in data]
    rows: list[dict[str, object]] = []
    for group, series in data.groupby(keys, sort=True):
        series = series.sort_values("order").drop_duplicates("order", keep="last")
        values = series["value"].to_numpy(dtype=float)
        spreads = None
        if {"p20", "p80"} <= set(series.columns):
            spread = (series["p80"].astype(float) - series["p20"].astype(float)) / series["value"]
            spreads = spread.fillna(0.0).to_numpy(dtype=float)
        found = detect(values, spreads, lower_is_better=metric == "time", **detect_kw)  # type: ignore[arg-type]
        commits = series["commit"].tolist()
        orders = series["order"].tolist()
        for i, cp in enumerate(found):
            before_i = cp.prev_index if cp.prev_index is not None else cp.index - 1
            later = found[i + 1 :]
            reverted = any(abs(c.after - cp.before) <= 0.5 * abs(cp.after - cp.before) for c in later)
            rows.append(
                {
                    **dict(zip(keys, group if isinstance(group, tuple) else (group,), strict=True)),
                    "metric": metric,
                    "commit_before": commits[before_i],
                    "commit_after": commits[cp.index],
                    "order_before": orders[before_i],
                    "order_after": orders[cp.index],
                    "before": cp.before,
                    "after": cp.after,
                    "ratio": cp.ratio,
                    "size_pct": 100 * (cp.ratio - 1),
                    "confidence": cp.confidence,
                    "regression": cp.regression,
                    "status": "reverted later" if reverted else "current",
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)
