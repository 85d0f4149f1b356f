"""LOWESS of binary labels on probabilities, fast at any n (Cleveland 1979, local linear, no
robustness iterations), as statsmodels' ``lowess(y, p, frac, it=0, delta=0.0)`` computes it.

The fit at a point x0 (Cleveland 1979, section 2; statsmodels' ``_smoothers_lowess.pyx``):
k = max(2, floor(frac n + 1e-10)), at most n; the radius h is the distance from x0 to its k-th
nearest row (statsmodels slides a window of k consecutive sorted rows while the row past its
right end is nearer than its left end, and takes the larger of the window's two extents); row j
weighs K(|p_j - x0| / h) with the tricube K(u) = (1 - u^3)^3 on [0, 1), 0 beyond; the fit is the
intercept at x0 of the weighted least-squares line, ybar + (x0 - pbar) cov(p, y) / var(p), with
var(p) floored at 1e-12 as statsmodels floors it. Tied rows outside the window sit at distance
h exactly and weigh 0, so which of them the window holds does not matter.

Exact LOWESS costs O(n k). Here it costs O(n) plus (points x cells):

- Rows are sorted once (equal weights: each class, then the two runs merged); weights are
  frequency weights (a weight of 3 counts as three copies of
  its row), so n above is the total weight; rows of zero weight drop out.
- The radius at x0 is exact, found on the sorted rows by bisection over the window's left end.
- The weighted sums of the regression, sum K, sum K p, sum K p^2, sum K y, sum K p y, are taken
  over cells: runs of sorted rows between :func:`knots` CELL_SPACING of the local radius apart.
  A cell holds its weight N, its mean m, and the second moment V of its rows about m, and the
  same for its positive rows (N1, Z1 the first moment about m, V1). K is expanded to second
  order about m: sum over the cell of K(p) p^a = sum K(m + t) (m + t)^a with
  K(m + t) = K + K' t + K'' t^2 / 2, so its error is third order in the cell's width over h (K
  is twice continuously differentiable, at u = 0 and u = 1 too). With at most MAX_CELLS
  distinct p the cells are the distinct values, t = 0, and the sums are exact.
- The fit at every row comes from fits at a few hundred nodes (:mod:`.lowess_rows`).

Where k rows tie at x0 the radius is 0 and statsmodels returns the label of one of them,
whichever its sort put first; here the fit there is their weighted mean label.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.kernels.pooling import merge_classes

FRAC = 0.75
"""The span: each fit uses the nearest 75% of the rows, R's loess default."""
MAX_CELLS = 1024
CELL_SPACING = 1.0 / 64
POINT_SPACING = 1.0 / 16
BLOCK = 1 << 14
"""Points x cells per block of the kernel sums: a few arrays of this size stay in cache."""
VAR_FLOOR = 1e-12
"""statsmodels floors the weighted variance of p in each local regression at 1e-12."""


class Rows(NamedTuple):
    """Rows of positive weight sorted by p, with what every radius is read from; ``w`` a
    broadcast 1 for equal weights (``unit``: no array of its own)."""

    p: FloatArray
    y: FloatArray
    w: FloatArray
    unit: bool  # equal weights, w a broadcast 1
    cum: FloatArray  # cum[i]: the weight of the rows before row i; cum[-1] the total
    starts: NDArray[np.intp] | None  # the first row of each distinct p; None past MAX_CELLS
    ends: NDArray[np.intp]  # ends[i]: the last row of the window of weight k from row i
    turns: FloatArray  # (p[i] + p[ends[i]]) / 2: past it, the window starting at row i is too far


class Cells(NamedTuple):
    """Per cell: the mean m of p, the weight n and second moment v about m; n1, z1 and v1 the
    same for the positive rows (z1 their first moment about m). Exact when v = z1 = v1 = 0."""

    m: FloatArray
    n: FloatArray
    v: FloatArray
    n1: FloatArray
    z1: FloatArray
    v1: FloatArray
    exact: bool


def sorted_rows(p: FloatArray, y: FloatArray, w: FloatArray | None) -> Rows | None:
    """The rows of positive weight sorted by p, their labels ``y`` 0/1 (checked by the
    caller) and weights ``w`` (None: equal); None when LOWESS is undefined (fewer than 3
    such rows, or a single distinct p)."""
    if w is not None and w.min() <= 0.0:  # copies only when some rows drop out
        keep = w > 0
        p, y, w = p[keep], y[keep], w[keep]
    if p.size < 3:
        return None
    if w is None:  # equal weights: no array of ones, and their running sums are exact counts
        ps, ys = _sorted_by_class(p, y)
        ws: FloatArray = np.broadcast_to(1.0, ps.shape)
        cum = np.arange(ps.size + 1, dtype=np.float64)
    else:
        order = np.argsort(p)
        ps, ys, ws = p[order], y[order], w[order]
        del order
        cum = np.zeros(ps.size + 1)
        np.cumsum(ws, out=cum[1:])
    if ps[0] == ps[-1]:
        return None
    total = float(cum[-1])
    k = min(total, max(2.0, math.floor(FRAC * total + 1e-10)))  # statsmodels' k
    # windows start at rows whose weight before them is at most total - k
    last = int(np.searchsorted(cum, total - k, side="right"))
    ends = np.searchsorted(cum, cum[:last] + k, side="left") - 1
    np.minimum(ends, ps.size - 1, out=ends)  # real weights: the sum's rounding
    changes = ps[1:] != ps[:-1]
    starts = None
    if np.count_nonzero(changes) < MAX_CELLS:  # an index of every change only when few
        starts = np.concatenate(([0], np.flatnonzero(changes) + 1))
    return Rows(ps, ys, ws, w is None, cum, starts, ends, (ps[:last] + ps[ends]) / 2.0)


def _sorted_by_class(p: FloatArray, y: FloatArray) -> tuple[FloatArray, FloatArray]:
    """p sorted, and the 0/1 labels y in the same order (tied rows in any order): each class
    sorted by value, then the two runs merged by a stable argsort, which finds them and merges
    in one pass. An argsort of p itself costs 1.5 s on 6 x 10^6 rows of 3000 distinct
    values (isotonic predictions), where this costs 0.4 s; 0.74 s on distinct values, 0.5 s."""
    positive = y > 0.0
    ps, from_positives = merge_classes(
        np.sort(np.compress(~positive, p)), np.sort(np.compress(positive, p))
    )
    return ps, from_positives.astype(np.float64)


def radius(rows: Rows, x0: FloatArray) -> FloatArray:
    """The distance from each x0 to its k-th nearest row (a weight counting as copies).

    The window of weight k that starts at row i reaches R(i) = max(x0 - p_i, p_end(i) - x0)
    from x0; the radius is min over i of R(i). R falls with i while x0 is past the window's
    midpoint ``turns[i]`` and rises after, so the minimum is at the turn: at the window of the
    first i whose midpoint is not below x0, or at the one before it.
    """
    p, ends = rows.p, rows.ends
    i = np.searchsorted(rows.turns, x0, side="left")
    before = np.where(i > 0, x0 - p[np.maximum(i - 1, 0)], np.inf)
    after = np.where(i < ends.size, p[ends[np.minimum(i, ends.size - 1)]] - x0, np.inf)
    result: FloatArray = np.minimum(before, after)
    return result


def knots(rows: Rows, spacing: float) -> FloatArray:
    """Points from the least p to the largest, each gap at most ``spacing`` times the radius at
    either end of it (but not below 2^-30 of the range, where a tied group holds weight k and
    the radius falls to 0): the fit varies on the scale of the radius, which is smallest where
    the rows crowd. Gaps are halved until they fit (the radius is 1-Lipschitz in x0, so a few
    rounds do)."""
    p = rows.p
    x = np.linspace(p[0], p[-1], 17)
    floor = (p[-1] - p[0]) * 2.0**-30
    for _ in range(64):  # a loop over rounds of refinement, not samples
        h = radius(rows, x)
        gap = np.diff(x)
        pieces = np.ceil(gap / np.maximum(spacing * np.minimum(h[:-1], h[1:]), floor))
        extra = (pieces - 1.0).astype(np.intp)
        if not extra.any():
            break
        left = np.repeat(np.arange(gap.size), extra)
        step = np.arange(left.size) - np.repeat(np.cumsum(extra) - extra, extra) + 1.0
        x = np.sort(np.concatenate((x, x[left] + gap[left] * step / pieces[left])))
    return x


def cells(rows: Rows) -> Cells:
    """Cut the sorted rows into cells, the distinct values of p when there are at most
    MAX_CELLS, else runs between :func:`knots` CELL_SPACING of the radius apart, and sum each."""
    p, y, w = rows.p, rows.y, rows.w
    starts = rows.starts
    exact = starts is not None
    if starts is None:
        starts = np.unique(np.searchsorted(p, knots(rows, CELL_SPACING)[:-1], side="left"))
    sizes = np.diff(np.append(starts, p.size))
    # three batch-sized temporaries at most, each product made in place once summed
    t = p - np.repeat(p[starts], sizes)  # from each cell's first row: 0 for tied rows
    n = np.add.reduceat(w, starts)
    work = w * t
    shift = np.add.reduceat(work, starts) / n  # the cell's mean is its first p + shift
    work *= t
    v = np.maximum(np.add.reduceat(work, starts) - shift * shift * n, 0.0)
    np.multiply(w, y, out=work)
    n1 = np.add.reduceat(work, starts)
    work *= t
    s1 = np.add.reduceat(work, starts)
    work *= t
    v1 = np.add.reduceat(work, starts) - 2.0 * shift * s1 + shift * shift * n1
    return Cells(p[starts] + shift, n, v, n1, s1 - shift * n1, np.maximum(v1, 0.0), exact)


def fit_at(rows: Rows, table: Cells, x0: FloatArray, h: FloatArray) -> FloatArray:
    """The local linear fit at each x0 (a value of p), radius h, unclipped."""
    out = np.empty_like(x0)
    step = max(1, BLOCK // table.m.size)
    work = np.empty((8, min(step, x0.size), table.m.size))
    for start in range(0, x0.size, step):  # a loop over blocks of points, not samples
        block = slice(start, start + step)
        out[block] = _fit_block(table, x0[block], h[block], work)
    for i in np.flatnonzero(h == 0.0):  # k rows tie at x0: a handful of points at most
        at = rows.p == x0[i]
        weight = rows.w[at].sum()
        out[i] = np.dot(rows.w[at], rows.y[at]) / weight if weight > 0 else np.nan
    return out


def _fit_block(table: Cells, x0: FloatArray, h: FloatArray, work: FloatArray) -> FloatArray:
    """The fits at a block of points, from the sums of K (p - x0)^a and K (p - x0) y over the
    cells, K expanded about each cell's mean (module docstring). Every array of the block is a
    slice of ``work``: fresh arrays of this size would cost a page fault per page each."""
    d, a, u, u3, q, K, K1, W = work[:, : x0.size]
    scale = 1.0 / np.where(h > 0.0, h, 1.0)[:, None]
    np.subtract(table.m, x0[:, None], out=d)
    np.abs(d, out=a)
    np.multiply(a, scale, out=u)
    np.minimum(u, 1.0, out=u)
    np.multiply(u, u, out=u3)
    u3 *= u
    np.subtract(1.0, u3, out=q)
    np.multiply(q, q, out=K)
    if not table.exact:  # dK/dp = -9 d |d| (1 - u^3)^2 / h^3
        np.multiply(K, a, out=K1)
        K1 *= d
        K1 *= -9.0 * scale**3
    K *= q  # the tricube (1 - u^3)^3

    def sums(M: FloatArray, cell: FloatArray, degree: int) -> list[FloatArray]:
        """sum over cells of M cell d^j, j = 0..degree."""
        np.multiply(M, cell, out=W)
        out = [W.sum(axis=1)]
        for _ in range(degree):
            np.multiply(W, d, out=W)
            out.append(W.sum(axis=1))
        return out

    S = sums(K, table.n, 2)  # sum K (p - x0)^j over the rows, j = 0, 1, 2
    T = sums(K, table.n1, 1)  # sum K (p - x0)^j y
    if not table.exact:
        # K(m + t) = K + K' t + K'' t^2 / 2 over a cell's rows, with sum t = 0, sum t^2 = v
        # (all rows), sum t = z1, sum t^2 = v1 (positive rows); d2K/dp2 =
        # 18 u (1 - u^3) (3 u^3 - (1 - u^3)) / h^2, left in u3.
        u3 *= 3.0
        u3 -= q
        u3 *= q
        u3 *= u
        u3 *= 18.0 * scale**2
        K2v = sums(u3, table.v, 2)
        K1v = sums(K1, table.v, 1)
        S[0] += 0.5 * K2v[0]
        S[1] += 0.5 * K2v[1] + K1v[0]
        S[2] += 0.5 * K2v[2] + 2.0 * K1v[1] + np.einsum("ij,j->i", K, table.v)
        K2v1, K1z1 = sums(u3, table.v1, 1), sums(K1, table.z1, 1)
        T[0] += 0.5 * K2v1[0] + K1z1[0]
        T[1] += 0.5 * K2v1[1] + K1z1[1] + np.einsum("ij,j->i", K, table.z1)
        T[1] += np.einsum("ij,j->i", K1, table.v1)
    mean_p, mean_y = S[1] / S[0], T[0] / S[0]
    var = np.maximum(S[2] / S[0] - mean_p * mean_p, VAR_FLOOR)
    fit: FloatArray = mean_y - mean_p * (T[1] / S[0] - mean_p * mean_y) / var
    return fit
