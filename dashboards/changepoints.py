"""Change points in one benchmark series: every step, with its commit range, size and confidence.

asv's own regression page (``asv.step_detect``) fits a piecewise-constant Potts model and then
reports only the regressions that still explain the *latest* value, so a regression that was later
fixed disappears. The dashboard must list all of them, up or down. This module finds them top-down
(divisive segmentation with a permutation test at every cut, as in e.divisive):

1. Work on ``log(value)`` so a step is relative (+20% is the same at 30 us and at 3 ms). Missing
   points (NaN, None, <= 0: failed runs) are dropped, and so are runs ``gross`` (2) x worse than a
   running median of 5: on this shared 2-core host a contended run is 5-60x slower and measured
   the host. Indices (and commit ranges, which then span the skipped runs) stay the original ones.
2. A window (first the whole series) is winsorised at ``CLIP`` sigma around its median, sigma being
   the point-to-point noise from the MAD of first differences, so a stray run that survived 1.
   pulls no harder than a 3-sigma point.
3. Scan every *step* (a split into left and right) and every *bump* (an interior interval on a
   geometric grid of lengths: a regression fixed some commits later) for the largest standardised
   difference of means; a permutation test of both maxima (fixed seed: reproducible) gives the
   p-value, and scanning each permutation the same way pays for the best cut having been picked.
   p = min(p_step / w, p_bump / (1 - w)), a weighted Bonferroni with w = ``STEP_WEIGHT``.
4. If p <= ``max_p``, cut there (both ends of a bump) and recurse into the pieces. Top-down keeps
   the windows long, so the tests keep their power.
5. Finally, jumps whose size (ratio of the neighbouring segments' medians) is under ``min_change``
   or under the runs' own noise (``SPREAD_FLOOR`` x the median (p80-p20)/median) are merged away,
   smallest first. ``confidence = 1 - p`` of the test that found the jump.

Limits: a permutation test cannot make k points at the end of an m-point window more significant
than 2 / C(m, k), so at max_p = 0.01 a step in the last two points is confirmed only in a window of
>= 23 points, one with three points after it in >= 13; confidence tops out near 0.999.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

CLIP = 3.0  # winsorise test windows at this many sigma around their median
MIN_SIGMA = 1e-9  # noise-free synthetic series still need a positive scale
STEP_WEIGHT = 0.8  # share of max_p spent on the step scan; bumps (fixed regressions) get the rest
GROSS = 2.0  # a run this many times worse than its running median measured the host, not the code
GROSS_PASSES = 3
SPREAD_FLOOR = 0.5  # a step must exceed half the runs' (p80-p20)/median: about one sample sigma
PERMUTATIONS = 1000  # usual count: p resolution 1/1001, so confidence tops out near 0.999 (0.995 for bumps)
MAX_PERMUTATIONS = 5000  # only for windows near max_p, where 1000 permutations cannot tell
PERMUTATION_CHUNK = 200  # stop early once a window clearly cannot reach max_p
GRID_RATIO = 1.5  # bump lengths scanned: 2, 3, 4/5, 7, 10, 15, ... (cost grows with log of the window)
SEED = 0x5EED  # fixed: the same series always gets the same answer


@dataclass(frozen=True)
class ChangePoint:
    """A step between ``index - 1`` and ``index`` (original positions; see ``prev_index`` for gaps)."""

    index: int
    before: float
    after: float
    ratio: float
    confidence: float
    regression: bool
    prev_index: int | None = None  # last valid point before the step; differs from index-1 across NaNs

    @property
    def size(self) -> float:
        return abs(self.ratio - 1.0)

    @property
    def commit_range(self) -> tuple[int, int]:
        """(last point at the old level, first point at the new level): the commits to bisect."""
        return (self.index - 1 if self.prev_index is None else self.prev_index, self.index)


@dataclass(frozen=True)
class _Series:
    """The valid points of a series: log values, raw values, spreads and their original indices."""

    y: np.ndarray
    raw: np.ndarray
    spreads: np.ndarray
    index: np.ndarray


@dataclass(frozen=True)
class _Cut:
    """The best interval of a window: a step at ``start`` (stop is None) or a bump [start, stop)."""

    start: int
    stop: int | None
    p: float


def detect(
    values: Sequence[float | None] | np.ndarray,
    spreads: Sequence[float | None] | np.ndarray | None = None,
    *,
    lower_is_better: bool = True,
    min_change: float = 0.02,
    max_p: float = 0.01,
    min_segment: int = 2,
    gross: float | None = GROSS,
) -> list[ChangePoint]:
    """Every change point of ``values`` in order; empty for a series too short to have one.

    ``gross``: a run this many times worse than its running median is skipped like a failed one
    (see _drop_gross); None keeps every point.
    """
    if min_segment < 1:
        raise ValueError(f"min_segment must be >= 1, got {min_segment}")
    s = _valid(values, spreads)
    if gross is not None:
        s = _drop_gross(s, gross, lower_is_better)
    if len(s.y) < 2 * min_segment:
        return []
    rng = np.random.default_rng(SEED)
    found = _divide(s.y, 0, len(s.y), _noise_sigma(s.y), rng, max_p=max_p, min_segment=min_segment)
    kept = _drop_small(s, found, min_change)
    edges = [0, *kept, len(s.y)]
    return [_change_point(s, edges[i - 1 : i + 2], kept[edges[i]], lower_is_better) for i in range(1, len(edges) - 1)]


def _valid(values: Sequence[float | None] | np.ndarray, spreads: Sequence[float | None] | np.ndarray | None) -> _Series:
    raw = np.array([np.nan if v is None else v for v in values], dtype=float)
    if spreads is None:
        spr = np.full(len(raw), np.nan)
    else:
        spr = np.array([np.nan if v is None else v for v in spreads], dtype=float)
        if len(spr) != len(raw):
            raise ValueError(f"spreads has {len(spr)} entries for {len(raw)} values")
    # Non-positive times or rates are failed runs too: they have no logarithm and no meaning.
    ok = np.isfinite(raw) & (raw > 0)
    idx = np.flatnonzero(ok)
    return _Series(np.log(raw[idx]), raw[idx], spr[idx], idx)


def _drop_gross(s: _Series, gross: float, lower_is_better: bool) -> _Series:
    """Treat runs ``gross`` x worse than their neighbourhood as failed: skipped like NaN.

    On this 2-core host a run that shares the CPU with anything else waits a scheduler slice per
    parallel call: 110 us becomes ~6.6 ms, 1.6 ms becomes ~8 ms, on a third of the points when
    busy. Such a run measures the host, not the commit. The neighbourhood is a running median of 5
    (repeated, so clusters of stray runs cannot hold it up), which follows any level that lasts 3
    points: a real regression, however large, stays; and at the end of the series the padding
    keeps even the last two points. Only the worse side is dropped: contention never speeds up.
    The price: three stray runs in a row are a level like any other, so clustered contention is
    reported as a (host) change; the calibration's A/A rates, with and without this, show both.
    """
    keep = np.ones(len(s.y), dtype=bool)
    limit = math.log(gross)
    for _ in range(GROSS_PASSES):
        y = s.y[keep]
        if len(y) < 5:
            break
        worse = (y - _running_median(y)) * (1.0 if lower_is_better else -1.0)
        bad = np.flatnonzero(keep)[worse > limit]
        if len(bad) == 0:
            break
        keep[bad] = False
    if keep.all():
        return s
    return _Series(s.y[keep], s.raw[keep], s.spreads[keep], s.index[keep])


def _running_median(y: np.ndarray, width: int = 5) -> np.ndarray:
    half = width // 2
    padded = np.concatenate((np.repeat(y[:1], half), y, np.repeat(y[-1:], half)))
    return np.median(np.lib.stride_tricks.sliding_window_view(padded, width), axis=1)


def _divide(
    y: np.ndarray, lo: int, hi: int, sigma: float, rng: np.random.Generator, *, max_p: float, min_segment: int
) -> dict[int, float]:
    """Jumps (segment start -> p) found in y[lo:hi], recursing into the pieces of every cut."""
    if hi - lo < 2 * min_segment:
        return {}
    cut = _best_cut(_clip(y[lo:hi], sigma), rng, max_p=max_p, min_segment=min_segment)
    if cut is None or cut.p > max_p:
        return {}
    starts = [lo + cut.start] if cut.stop is None else [lo + cut.start, lo + cut.stop]
    found = dict.fromkeys(starts, cut.p)
    edges = [lo, *starts, hi]
    for a, b in zip(edges, edges[1:], strict=False):
        found |= _divide(y, a, b, sigma, rng, max_p=max_p, min_segment=min_segment)
    return found


def _noise_sigma(y: np.ndarray) -> float:
    """Point-to-point noise from the MAD of first differences (a difference of two points has sigma * sqrt 2).

    Differences see a step only once each, so a few steps barely move this; the spread of the
    values themselves would count every step as noise.
    """
    d = np.diff(y)
    mad = float(np.median(np.abs(d - np.median(d)))) if len(d) else 0.0
    return max(mad / (0.6745 * math.sqrt(2.0)), MIN_SIGMA)


def _clip(y: np.ndarray, sigma: float) -> np.ndarray:
    """Winsorise a window at ``CLIP`` sigma around its median, then centre it (as _scan needs).

    On this host one contended run can be 6x slower than its neighbours; unclipped, a few of those
    outweigh a real 20% step anywhere in the window. Clipped, each stray point pulls at most as
    hard as a 3-sigma one, while a step keeps its contrast (clipping is monotone). Magnitudes under
    the clip still count, which ranks would throw away: two points 20% up at the end of a series
    are a step on values, but only "the two largest ranks" on ranks. Sigma is the whole series'
    (one number for every window), so each window's permutations stay an (almost exact) null.
    """
    med = float(np.median(y))
    z = np.clip(y - med, -CLIP * sigma, CLIP * sigma)
    return z - z.mean()


def _lengths(m: int, min_segment: int) -> np.ndarray:
    """Bump lengths scanned: a geometric grid, dense where bumps are short."""
    grid = {int(round(min_segment * GRID_RATIO**i)) for i in range(64)}
    return np.array(sorted(g for g in grid if min_segment <= g <= m - 2 * min_segment), dtype=int)


def _scan(z: np.ndarray, min_segment: int) -> tuple[np.ndarray, np.ndarray]:
    """Row-wise (best step, best bump) statistics of centred rows ``z``.

    For an interval of length L with sum S, |mean inside - mean outside| * sqrt(L (m-L) / m)
    reduces to |S| sqrt(m / (L (m-L))): each interval gets the same null scale, so neither scan
    favours long or short intervals. Steps are the intervals touching an end (every split); bumps
    are interior intervals with at least ``min_segment`` points on both sides.
    """
    m = z.shape[-1]
    c = np.concatenate((np.zeros((*z.shape[:-1], 1)), np.cumsum(z, axis=-1)), axis=-1)
    j = np.arange(min_segment, m - min_segment + 1)
    step = np.max(np.abs(c[..., j]) * np.sqrt(m / (j * (m - j))), axis=-1)
    bump = np.zeros(z.shape[:-1])
    for length in _lengths(m, min_segment):
        # Interior starts a in [min_segment, m - min_segment - length].
        sums = c[..., min_segment + length : m - min_segment + 1] - c[..., min_segment : m - min_segment - length + 1]
        bump = np.maximum(bump, np.max(np.abs(sums), axis=-1) * math.sqrt(m / (length * (m - length))))
    return step, bump


def _locate(z: np.ndarray, min_segment: int, bump: bool) -> tuple[int, int | None]:
    """Where the observed window's best step (or bump) is.

    The test scans bump lengths on a grid (enough to judge whether there is one); the location is
    searched over every length, once, so a 9-commit regression is not reported as a 10-commit one.
    """
    m = len(z)
    c = np.concatenate(([0.0], np.cumsum(z)))
    if not bump:
        j = np.arange(min_segment, m - min_segment + 1)
        return int(j[np.argmax(np.abs(c[j]) * np.sqrt(m / (j * (m - j))))]), None
    a, b = np.meshgrid(np.arange(m + 1), np.arange(m + 1), indexing="ij")
    length = b - a
    ok = (a >= min_segment) & (b <= m - min_segment) & (length >= min_segment)
    score = np.where(ok, np.abs(c[b] - c[a]) * np.sqrt(m / np.maximum(length * (m - length), 1)), -1.0)
    start, stop = np.unravel_index(int(np.argmax(score)), score.shape)
    return int(start), int(stop)


def _best_cut(z: np.ndarray, rng: np.random.Generator, *, max_p: float, min_segment: int) -> _Cut | None:
    """The window's most significant step or bump, with its permutation p-value."""
    if not np.any(z):
        return None  # all points equal: nothing to find
    step_obs, bump_obs = _scan(z, min_segment)
    # Two scans, one verdict: a weighted Bonferroni (p_step / w, p_bump / (1 - w)) keeps the window's
    # false-positive rate at max_p. A short window has no interior interval to scan: steps only.
    w = STEP_WEIGHT if len(_lengths(len(z), min_segment)) else 1.0
    # Permutations equal to the observed one count as "as extreme" (clipped values tie often).
    tol = 1e-9 * max(1.0, float(step_obs), float(bump_obs))
    step_hits = bump_hits = done = 0
    while done < MAX_PERMUTATIONS:
        step_perm, bump_perm = _scan(rng.permuted(np.broadcast_to(z, (PERMUTATION_CHUNK, len(z))), axis=1), min_segment)
        step_hits += int(np.count_nonzero(step_perm >= step_obs - tol))
        bump_hits += int(np.count_nonzero(bump_perm >= bump_obs - tol))
        done += PERMUTATION_CHUNK
        # Certain to end above max_p even after all permutations: stop (most noise windows, at 200).
        if _combine((1 + step_hits) / (MAX_PERMUTATIONS + 1), (1 + bump_hits) / (MAX_PERMUTATIONS + 1), w) > max_p:
            break
        # Significant on the usual count: more permutations would only sharpen the confidence.
        if done >= PERMUTATIONS and _combine((1 + step_hits) / (done + 1), (1 + bump_hits) / (done + 1), w) <= max_p:
            break
    p_step, p_bump = (1 + step_hits) / (done + 1), (1 + bump_hits) / (done + 1)
    bump = w < 1.0 and p_bump / (1.0 - w) < p_step / w
    start, stop = _locate(z, min_segment, bump)
    return _Cut(start, stop, _combine(p_step, p_bump, w))


def _combine(p_step: float, p_bump: float, w: float) -> float:
    return min(1.0, p_step / w, p_bump / (1.0 - w) if w < 1.0 else 1.0)


def _median_spread(spreads: np.ndarray) -> float:
    ok = spreads[np.isfinite(spreads) & (spreads >= 0)]
    return float(np.median(ok)) if len(ok) else 0.0


def _drop_small(s: _Series, found: dict[int, float], min_change: float) -> dict[int, float]:
    """Merge away jumps below min_change or the runs' noise floor, smallest excess first."""
    kept = dict(sorted(found.items()))
    while kept:
        edges = [0, *kept, len(s.y)]
        excess = []
        for i in range(1, len(edges) - 1):
            lo, k, hi = edges[i - 1 : i + 2]
            size = abs(math.log(np.median(s.raw[k:hi]) / np.median(s.raw[lo:k])))
            floor = max(math.log1p(min_change), SPREAD_FLOOR * _median_spread(s.spreads[lo:hi]))
            excess.append((size - floor, k))
        worst, k = min(excess)
        if worst > 0:
            break
        del kept[k]  # its neighbours' levels change with it, so re-measure before the next one
    return kept


def _change_point(s: _Series, triple: list[int], p: float, lower_is_better: bool) -> ChangePoint:
    lo, k, hi = triple
    before, after = float(np.median(s.raw[lo:k])), float(np.median(s.raw[k:hi]))
    ratio = after / before
    return ChangePoint(
        index=int(s.index[k]),
        before=before,
        after=after,
        ratio=ratio,
        confidence=1.0 - p,
        regression=ratio > 1.0 if lower_is_better else ratio < 1.0,
        prev_index=int(s.index[k - 1]),
    )
