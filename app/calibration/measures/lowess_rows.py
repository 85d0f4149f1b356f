"""The LOWESS fit at every row, from fits at a few hundred nodes (see :mod:`.lowess`).

With at most MAX_POINTS distinct p, the fit is computed at each of them: exact. Otherwise at
nodes, distinct values of p spaced at most POINT_SPACING of the radius apart
(:func:`.lowess.knots`), and interpolated, as statsmodels' ``delta`` interpolates (linearly)
between its fits:

- The fit at x0 is F(x0, h(x0)), F smooth in both, but the radius h, the distance to the k-th
  nearest row, wanders like a random walk as the window slides, by about the square root of the
  rows passed times their spacing. Between two nodes the radius is taken as linear, h~, and the
  fit along it, g(x) = F(x, h~(x)), is smooth: it is interpolated by cubic Hermite polynomials,
  with g' = F_x + F_h h~' at either node (F_x, F_h by central differences).
- At each row, h - h~ is small, and F(x, h) = g(x) + F_h (h - h~) + F_hh (h - h~)^2 / 2, with
  F_h and F_hh interpolated linearly between the nodes.
- Where the midpoint of two nodes is off its Hermite value by more than TOL, it becomes a node
  (for a few rounds): where a heavy tie group crosses the window's edge, the fit bends sharply.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from app.calibration.base import FloatArray
from app.calibration.measures.lowess import (
    POINT_SPACING,
    Cells,
    Rows,
    cells,
    fit_at,
    knots,
    radius,
)

MAX_POINTS = 1024
STEP = 1e-4
"""The step, relative to the radius, of the central differences for F_x, F_h and F_hh."""
TOL = 1e-7
ROUNDS = 4
ROW_BLOCK = 1 << 14
"""Rows interpolated at a time, so that no temporary leaves the cache."""


class Nodes(NamedTuple):
    """The fit s = F(x, h), and F_h, F_hh, F_x, at nodes x with radii h."""

    x: FloatArray
    h: FloatArray
    s: FloatArray
    by_h: FloatArray
    by_hh: FloatArray
    by_x: FloatArray


def fitted(rows: Rows) -> FloatArray:
    """The fit at every sorted row, unclipped."""
    table = cells(rows)
    if rows.starts is not None and rows.starts.size <= MAX_POINTS:
        x0 = rows.p[rows.starts]
        at_values = fit_at(rows, table, x0, radius(rows, x0))
        return np.repeat(at_values, np.diff(np.append(rows.starts, rows.p.size)))
    nodes = _nodes(rows, table, _first_points(rows))
    for _ in range(ROUNDS):  # a loop over rounds of refinement, not samples
        x = nodes.x
        holds_rows = np.searchsorted(rows.p, x[1:]) > np.searchsorted(rows.p, x[:-1], "right")
        mid = ((x[:-1] + x[1:]) / 2.0)[holds_rows]
        h_mid = ((nodes.h[:-1] + nodes.h[1:]) / 2.0)[holds_rows]
        off = np.abs(fit_at(rows, table, mid, h_mid) - _interpolate(nodes, mid))
        if not np.any(off > TOL):
            break
        nodes = _merge(nodes, _nodes(rows, table, mid[off > TOL]))
    out = np.empty_like(rows.p)
    for start in range(0, out.size, ROW_BLOCK):  # a loop over blocks of rows
        block = slice(start, start + ROW_BLOCK)
        out[block] = _interpolate(nodes, rows.p[block], radius(rows, rows.p[block]))
    return out


def _first_points(rows: Rows) -> FloatArray:
    """Distinct values of p at :func:`knots` POINT_SPACING of the radius apart (the first at or
    after each knot, and the last before it when the next pick is further), the ends, and those
    either side of where the window starts and stops sliding, kinks of the fit."""
    p = rows.p
    grid = knots(rows, POINT_SPACING)
    first = np.searchsorted(p, grid, side="left")
    wide = np.flatnonzero(np.diff(p[np.minimum(first, p.size - 1)]) > 1.5 * np.diff(grid))
    above = np.searchsorted(p, rows.turns[[0, -1]], side="left")
    picks = np.concatenate((first, first[wide + 1] - 1, above - 1, above, [0, p.size - 1]))
    values: FloatArray = np.unique(p[np.clip(picks, 0, p.size - 1)])
    return values


def _nodes(rows: Rows, table: Cells, x: FloatArray) -> Nodes:
    h = radius(rows, x)
    # where k rows tie at x the radius is 0 and the fit is their mean label: no slopes there
    tied = h == 0.0
    d = STEP * np.where(tied, 1.0, h)
    points = np.concatenate((x, x, x, x + d, x - d))
    radii = np.concatenate((h, h + d, h - d, h, h))
    s, up, down, right, left = fit_at(rows, table, points, radii).reshape(5, x.size)
    by_h, by_hh = (up - down) / (2.0 * d), (up - 2.0 * s + down) / (d * d)
    by_x = (right - left) / (2.0 * d)
    for slopes in (by_h, by_hh, by_x):
        slopes[tied] = 0.0
    return Nodes(x, h, s, by_h, by_hh, by_x)


def _merge(a: Nodes, b: Nodes) -> Nodes:
    order = np.argsort(np.concatenate((a.x, b.x)))
    return Nodes(*(np.concatenate((u, v))[order] for u, v in zip(a, b, strict=True)))


def _interpolate(nodes: Nodes, x: FloatArray, h: FloatArray | None = None) -> FloatArray:
    """g(x) by cubic Hermite interpolation between the nodes; with the radii h at x, F(x, h)."""
    j = np.clip(np.searchsorted(nodes.x, x, side="right"), 1, nodes.x.size - 1) - 1
    x0, x1, s = nodes.x[j], nodes.x[j + 1], nodes.s
    gap = x1 - x0
    t = (x - x0) / gap
    h_slope = (nodes.h[j + 1] - nodes.h[j]) / gap
    g0 = gap * (nodes.by_x[j] + nodes.by_h[j] * h_slope)
    g1 = gap * (nodes.by_x[j + 1] + nodes.by_h[j + 1] * h_slope)
    # the Hermite cubic in Horner form: s0 + t (g0 + t (c2 + t c3))
    c2 = 3.0 * (s[j + 1] - s[j]) - 2.0 * g0 - g1
    c3 = 2.0 * (s[j] - s[j + 1]) + g0 + g1
    curve: FloatArray = s[j] + t * (g0 + t * (c2 + t * c3))
    if h is None:
        return curve
    drift = h - (nodes.h[j] + t * (nodes.h[j + 1] - nodes.h[j]))
    f_h = nodes.by_h[j] + t * (nodes.by_h[j + 1] - nodes.by_h[j])
    f_hh = nodes.by_hh[j] + t * (nodes.by_hh[j + 1] - nodes.by_hh[j])
    result: FloatArray = curve + drift * (f_h + 0.5 * drift * f_hh)
    return result
