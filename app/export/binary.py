"""Each binary method's predict as ONNX nodes: a vector of scores to a vector of probabilities.

One function per method, each the formula of that method's ``predict`` in
:mod:`app.calibration`, step by step and in the same order: ``np.clip`` is Clip (or Max then
Min against tensors), scipy's ``expit`` is :func:`expit`, ``np.searchsorted`` is
:func:`~app.export.steps.count_at_most`. Arithmetic and comparisons then give the same
doubles; a runtime's Exp and Log may differ from the C library's by an ulp. Every function
takes the fitted calibrator and the name of the DOUBLE score vector, and returns its outputs
by name: ``probabilities``, and ``p0``, ``p1`` for Venn-ABERS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from app.calibration import (
    BETA_EPS,
    LOGISTIC_SATURATION,
    BetaCalibrator,
    Calibrator,
    HistogramBinning,
    IsotonicCalibrator,
    LogisticCorrection,
    MinMaxScaling,
    OutputBound,
    PlattCalibrator,
    VennAbersCalibrator,
)

from .graph import ExportError, GraphBuilder
from .steps import count_at_most, interp, interp_clipped, lookup

Outputs = dict[str, str]


def binary_outputs(g: GraphBuilder, calibrator: Calibrator, f: str) -> Outputs:
    """The outputs of a fitted binary ``calibrator`` on the score vector ``f``
    (:class:`ExportError` for a method without a graph)."""
    emitter = EMITTERS.get(type(calibrator))
    if emitter is None:
        raise ExportError(f"no ONNX graph for {type(calibrator).__name__}")
    return emitter(g, calibrator, f)


def clipped(g: GraphBuilder, bound: OutputBound, p: str) -> str:
    """A binary bound (:meth:`OutputBound.apply`): p clipped into [low, high]."""
    if bound.rule == "none":
        return p
    return g.op("Clip", p, g.const(bound.low), g.const(bound.high))


def expit(g: GraphBuilder, z: str) -> str:
    """1 / (1 + exp(-z)), as scipy's ``expit`` computes it. Not ONNX's Sigmoid: runtimes
    compute that to an absolute ulp, but one-vs-rest renormalises rows of tiny probabilities,
    where only a relative one keeps 1e-12 (ONNX Runtime's Sigmoid: 2.9e-9 off there)."""
    return g.op("Reciprocal", g.op("Add", g.const(1.0), g.op("Exp", g.op("Neg", z))))


def _platt(g: GraphBuilder, c: PlattCalibrator, f: str) -> Outputs:
    # expit(f * (-A) - B): Platt's eq. (1), in predict's order
    z = g.minus(g.times(f, -c.A), c.B)
    return {"probabilities": clipped(g, c.bound, expit(g, z))}


def _logistic(g: GraphBuilder, c: LogisticCorrection, f: str) -> Outputs:
    margin = g.op("Clip", f, g.const(-LOGISTIC_SATURATION), g.const(LOGISTIC_SATURATION))
    return {"probabilities": expit(g, g.times(margin, 2.0))}


def _beta(g: GraphBuilder, c: BetaCalibrator, f: str) -> Outputs:
    """expit(a ln f - b ln(1 - f) + c) on f clipped to [BETA_EPS, 1 - BETA_EPS] (Kull et al. 2017).

    ONNX has no log1p: ln(1 - f) is Goldberg's log(u) * (-f) / (u - 1) with u = 1 - f, within
    a few ulps of log1p(-f) (u != 1, since f >= BETA_EPS).
    """
    x = g.op("Clip", f, g.const(BETA_EPS), g.const(1.0 - BETA_EPS))
    u = g.op("Sub", g.const(1.0), x)
    log1p_minus = g.op(
        "Div", g.op("Mul", g.op("Log", u), g.op("Neg", x)), g.op("Sub", u, g.const(1.0))
    )
    terms = g.op("Add", g.times(g.op("Log", x), c.a), g.times(g.op("Neg", log1p_minus), c.b))
    z = g.minus(terms, -c.c)
    z = g.op("Clip", z, g.const(-800.0), g.const(800.0))
    return {"probabilities": clipped(g, c.bound, expit(g, z))}


def _minmax(g: GraphBuilder, c: MinMaxScaling, f: str) -> Outputs:
    if not c.high > c.low:  # a constant training batch: 0.5 everywhere
        return {"probabilities": g.full_like(f, 0.5)}
    scale = c.scale
    width = c.high * scale - c.low * scale
    scaled = f if scale == 1.0 else g.times(f, scale)
    ratio = g.divided(g.minus(scaled, c.low * scale), width)
    return {"probabilities": g.op("Clip", ratio, g.const(0.0), g.const(1.0))}


def _isotonic(g: GraphBuilder, c: IsotonicCalibrator, f: str) -> Outputs:
    x, v = c.thresholds, c.values
    if c.interpolation == "linear" and x.size > 1:
        p = interp(g, x, v, f) if c.interp_is_exact() else interp_clipped(g, x, v, f)
    else:  # step, or one threshold: v[max(searchsorted(x, f, "right") - 1, 0)]
        # v[0] for a count of 0 or 1, v[i - 1] for a count of i
        p = lookup(g, np.concatenate([v[:1], v]), count_at_most(g, x, f))
    return {"probabilities": clipped(g, c.bound, p)}


def _histogram(g: GraphBuilder, c: HistogramBinning, f: str) -> Outputs:
    p = lookup(g, c.values, count_at_most(g, c.edges[1:-1], f))
    return {"probabilities": clipped(g, c.bound, p)}


def _venn_abers(g: GraphBuilder, c: VennAbersCalibrator, f: str) -> Outputs:
    table = c.table
    step = count_at_most(g, table.edges, f)
    return {
        "probabilities": lookup(g, table.p, step),
        "p0": lookup(g, table.low, step),
        "p1": lookup(g, table.high, step),
    }


EMITTERS: dict[type, Callable[[GraphBuilder, Any, str], Outputs]] = {
    PlattCalibrator: _platt,
    LogisticCorrection: _logistic,
    BetaCalibrator: _beta,
    MinMaxScaling: _minmax,
    IsotonicCalibrator: _isotonic,
    HistogramBinning: _histogram,
    VennAbersCalibrator: _venn_abers,
}
"""The emitter of each binary method's class."""
