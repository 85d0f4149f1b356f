"""An adjusted version's Bayes steps as ONNX nodes, after its method's graph.

Each step is :func:`~app.calibration.adjust` written out as predict computes it: a binary
probability p becomes p r1 / ((1 - p) r0 + p r1) (the two-column row (1 - p, p) times the
ratios prior_to / prior_from, divided by its sum); a k-class row is multiplied by the ratios
and divided by its sum (ReduceSum along axis 1, as numpy's ``sum(axis=1)``). Venn-ABERS
intervals follow :func:`~app.calibration.adjust_interval`: a binary p0 and p1 each by the
same step; k-class ones by :func:`~app.calibration.bayes_bound` against the largest (p0) and
smallest (p1) ratio of the other classes. The ratios are constants computed by the same
functions predict calls, so the graph's doubles are predict's.
"""

from __future__ import annotations

import numpy as np

from app.calibration import Adjustment, FloatArray, prior_ratio, rest_ratios

from .binary import Outputs
from .graph import GraphBuilder


def adjusted_outputs(
    g: GraphBuilder, outputs: Outputs, steps: tuple[Adjustment, ...], k: int
) -> Outputs:
    """``outputs`` (``probabilities``, and ``p0``, ``p1`` for Venn-ABERS) through each step."""
    for step in steps:
        ratio = prior_ratio(step.prior_from, step.prior_to, k)
        if k > 2 and "p0" in outputs:  # the class against the rest: bounded, not one map
            largest, smallest = rest_ratios(ratio)
            outputs = {
                "probabilities": _bayes(g, outputs["probabilities"], ratio),
                "p0": _bound(g, outputs["p0"], ratio, largest),
                "p1": _bound(g, outputs["p1"], ratio, smallest),
            }
        else:
            outputs = {name: _bayes(g, value, ratio) for name, value in outputs.items()}
    return outputs


def _bayes(g: GraphBuilder, p: str, ratio: FloatArray) -> str:
    """:func:`~app.calibration.adjust` of a binary vector (w1 / (w0 + w1)) or of k-class rows."""
    if ratio.size == 2:
        w0 = g.times(g.op("Sub", g.const(1.0), p), float(ratio[0]))
        w1 = g.times(p, float(ratio[1]))
        return g.op("Div", w1, g.op("Add", w0, w1))
    weighted = _times_columns(g, p, ratio)
    total = g.op("ReduceSum", weighted, g.const(np.array([1], dtype=np.int64)), keepdims=1)
    return g.op("Div", weighted, total)


def _bound(g: GraphBuilder, p: str, ratio: FloatArray, rest: FloatArray) -> str:
    """:func:`~app.calibration.bayes_bound`: p r / (p r + (1 - p) rest), column by column."""
    weighted = _times_columns(g, p, ratio)
    others = _times_columns(g, g.op("Sub", g.const(1.0), p), rest)
    return g.op("Div", weighted, g.op("Add", weighted, others))


def _times_columns(g: GraphBuilder, x: str, c: FloatArray) -> str:
    """x times the row vector ``c``. ONNX Runtime's optimiser, which drops a multiply by a
    scalar 1 in float32 (:meth:`GraphBuilder.times`), keeps this one whatever ``c`` holds
    (tested with every ratio 1 in float32 and not in float64)."""
    return g.op("Mul", x, g.const(np.ascontiguousarray(c, dtype=np.float64)))
