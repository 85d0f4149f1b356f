"""k-class calibrators as ONNX nodes: an n x k score matrix to n x k probability rows.

One-vs-rest runs each class's binary graph on its column (:mod:`app.export.binary`) and
renormalises the rows as :class:`~app.calibration.methods.multiclass.OneVsRest` does (a row of zeros
becomes uniform); temperature scaling and Boström's correction follow their ``predict``
step by step. Reductions run along axis 1 with ``keepdims``, as numpy's
``sum(axis=1, keepdims=True)`` does.
"""

from __future__ import annotations

import numpy as np

from app.calibration import (
    TEMPERATURE_FLOOR,
    TEMPERATURE_SMALLEST_P,
    BostromCalibrator,
    MulticlassCalibrator,
    OneVsRest,
    OutputBound,
    TemperatureScaling,
    checkpoint,
)

from .binary import Outputs, binary_outputs, expit
from .graph import ExportError, GraphBuilder


def multiclass_outputs(
    g: GraphBuilder, calibrator: MulticlassCalibrator, s: str, k: int
) -> Outputs:
    """The outputs of a fitted ``calibrator`` of k classes on the score matrix ``s``."""
    if isinstance(calibrator, OneVsRest):
        return _one_vs_rest(g, calibrator, s, k)
    if isinstance(calibrator, TemperatureScaling):
        return _temperature(g, calibrator, s)
    if isinstance(calibrator, BostromCalibrator):
        return _bostrom(g, calibrator, s, k)
    raise ExportError(f"no ONNX graph for {type(calibrator).__name__}")


def _row_sums(g: GraphBuilder, p: str) -> str:
    return g.op("ReduceSum", p, g.const(np.array([1], dtype=np.int64)), keepdims=1)


def _rows_bounded(g: GraphBuilder, bound: OutputBound, p: str) -> str:
    """A k-class bound (:meth:`OutputBound.apply`): raised to ``low``, rows renormalised."""
    if bound.rule == "none":
        return p
    raised = g.op("Max", p, g.const(bound.low))
    return g.op("Div", raised, _row_sums(g, raised))


def _one_vs_rest(g: GraphBuilder, calibrator: OneVsRest, s: str, k: int) -> Outputs:
    columns: dict[str, list[str]] = {}
    for j, binary in enumerate(calibrator.calibrators):  # a loop over classes, not samples
        checkpoint()  # 40,000 classes are 40,000 branches: the job's budget is checked per class
        column = g.op("Gather", s, g.const(j), axis=1)
        for output, vector in binary_outputs(g, binary, column).items():
            as_column = g.op("Unsqueeze", vector, g.const(np.array([1], dtype=np.int64)))
            columns.setdefault(output, []).append(as_column)
    matrices = {output: g.op("Concat", *parts, axis=1) for output, parts in columns.items()}
    p = matrices["probabilities"]
    total = _row_sums(g, p)
    renormalised = g.op("Div", p, total)
    uniform = g.const(1.0 / k)
    matrices["probabilities"] = g.op(
        "Where", g.op("Greater", total, g.const(0.0)), renormalised, uniform
    )
    return matrices


def _temperature(g: GraphBuilder, c: TemperatureScaling, s: str) -> Outputs:
    """softmax(z / T) of logits centred on their row maximum and floored (Guo et al. 2017);
    probability rows are read as their logs first."""
    z = (
        g.op("Log", g.op("Max", s, g.const(TEMPERATURE_SMALLEST_P)))
        if c.input == "probabilities"
        else s
    )
    centred = g.op("Sub", z, g.op("ReduceMax", z, axes=[1], keepdims=1))
    scaled = g.divided(g.op("Max", centred, g.const(TEMPERATURE_FLOOR)), c.T)
    e = g.op("Exp", scaled)
    return {"probabilities": _rows_bounded(g, c.bound, g.op("Div", e, _row_sums(g, e)))}


def _bostrom(g: GraphBuilder, c: BostromCalibrator, s: str, k: int) -> Outputs:
    """The top class (its first maximum) gets p + r (1 - p), the others p (1 - r) (Boström
    2008), on rows renormalised to sum to 1; r a constant or a sigmoid of the top p."""
    p = g.op("Div", s, _row_sums(g, s))
    top = g.op("ArgMax", p, axis=1, keepdims=1, select_last_index=0)
    if c.mode == "constant":
        r = g.const(c.r)
        kept = g.times(p, 1.0 - c.r)
    else:
        p_top = g.op("GatherElements", p, top, axis=1)
        r = expit(g, g.minus(g.times(p_top, c.a), -c.b))
        kept = g.op("Mul", p, g.op("Sub", g.const(1.0), r))
    classes = g.const(np.arange(k, dtype=np.int64))
    corrected = g.op("Where", g.op("Equal", classes, top), g.op("Add", kept, r), kept)
    return {"probabilities": _rows_bounded(g, c.bound, corrected)}
