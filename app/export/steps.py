"""Step functions and linear interpolation between knots, as ONNX subgraphs.

ONNX has no ``searchsorted``; a comparison of every score with every knot would cost n x m
memory (10^4 scores against 10^4 isotonic thresholds: 10^8 booleans). Instead the graph
unrolls a branchless binary search over the knots padded to 2^K - 1 entries: K rounds of
Gather, LessOrEqual and Where give, for each score, the number of knots <= it
(``np.searchsorted(knots, f, side="right")``) in O(n log m), with standard operators only.
"""

from __future__ import annotations

import numpy as np

from app.calibration import FloatArray, interp_slopes, overflow_scale

from .graph import GraphBuilder


def count_at_most(g: GraphBuilder, knots: FloatArray, f: str) -> str:
    """INT64 tensor shaped like ``f``: how many ``knots`` (sorted ascending) are <= each value.

    The knots are padded with NaN to 2^K - 1 entries (2^K > m): NaN <= f is false for every
    f, +inf included, so the search never passes the m-th knot. From position 0, round
    s = 2^(K-1), ..., 1 moves to position + s when the knot at position + s - 1 is <= f:
    that finds the largest position whose knots before it are all <= f, which for sorted
    knots is their count. A NaN score counts m, as searchsorted sorts NaN last.
    """
    m = knots.size
    position = g.full_like(f, 0)
    if m == 0:
        return position
    rounds = m.bit_length()  # 2^rounds > m
    padded = np.full(2**rounds - 1, np.nan)
    padded[:m] = knots
    table = g.const(padded, "knots")
    for step in (2**r for r in reversed(range(rounds))):
        probe = g.op("Gather", table, g.op("Add", position, g.const(step - 1)))
        moved = g.op("Add", position, g.const(step))
        position = g.op("Where", g.op("LessOrEqual", probe, f), moved, position)
    return g.op("Where", g.op("IsNaN", f), g.const(m), position)


def lookup(g: GraphBuilder, values: FloatArray, index: str) -> str:
    """``values[index]``, a DOUBLE tensor shaped like the INT64 ``index``."""
    return g.op("Gather", g.const(np.ascontiguousarray(values, dtype=np.float64)), index)


def interp(g: GraphBuilder, x: FloatArray, v: FloatArray, f: str) -> str:
    """``np.interp(f, x, v)`` for m >= 2 knots, as numpy computes it (``arr_interp``): the end
    value outside [x[0], x[-1]] and at x[-1], v[j] at a knot, else
    slope[j] * (f - x[j]) + v[j] with slope[j] = (v[j+1] - v[j]) / (x[j+1] - x[j]), the same
    operations in the same order, so the same double; NaN for NaN.
    """
    m = x.size
    seen = count_at_most(g, x, f)
    j = g.op("Clip", g.op("Sub", seen, g.const(1)), g.const(0), g.const(m - 2))
    slopes = interp_slopes(x, v)  # inf on a gap no float fits in: used only at f == x[j]
    x0, v0 = lookup(g, x, j), lookup(g, v, j)
    inside = g.op("Add", g.op("Mul", lookup(g, slopes, j), g.op("Sub", f, x0)), v0)
    at_knot = g.op("Where", g.op("Equal", f, x0), v0, inside)
    below = g.op("Where", g.op("Equal", seen, g.const(0)), g.const(float(v[0])), at_knot)
    ends = g.op("Where", g.op("Equal", seen, g.const(m)), g.const(float(v[-1])), below)
    return g.op("Where", g.op("IsNaN", f), f, ends)


def interp_clipped(g: GraphBuilder, x: FloatArray, v: FloatArray, f: str) -> str:
    """The isotonic map's own interpolation (``app.calibration.methods.isotonic._interpolate``),
    used where ``np.interp`` could overflow or step down by an ulp: f clipped to [x[0], x[-1]],
    thresholds halved past 2^1022, t = (f - x[j]) / (x[j+1] - x[j]) (0 on an empty segment),
    and v[j] + t (v[j+1] - v[j]) clipped into [v[j], v[j+1]]."""
    m = x.size
    scale = overflow_scale(x)
    xs = x * scale  # the products predict computes, to the same bits
    widths = xs[1:] - xs[:-1]
    seen = count_at_most(g, x, f)
    j = g.op("Clip", g.op("Sub", seen, g.const(1)), g.const(0), g.const(m - 2))
    clipped = g.op("Clip", f, g.const(float(x[0])), g.const(float(x[-1])))
    scaled = clipped if scale == 1.0 else g.times(clipped, scale)
    width = lookup(g, widths, j)
    ratio = g.op("Div", g.op("Sub", scaled, lookup(g, xs[:-1], j)), width)
    t = g.op("Where", g.op("Greater", width, g.const(0.0)), ratio, g.const(0.0))
    v0, v1 = lookup(g, v[:-1], j), lookup(g, v[1:], j)
    p = g.op("Add", v0, g.op("Mul", t, lookup(g, v[1:] - v[:-1], j)))
    return g.op("Min", g.op("Max", p, v0), v1)
