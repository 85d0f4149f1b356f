"""Fitted calibrators as ONNX models, with their parity to ``predict`` measured at export.

A model server that runs ONNX (ONNX Runtime, Triton, KServe) can then calibrate inside its
own graph, with no network hop. The graph maps the input ``scores`` (DOUBLE, [n] for a binary
calibrator or [n, k]) to ``probabilities`` (and ``p0``, ``p1`` for Venn-ABERS) through the
same operations in the same order as the method's ``predict``, with standard ``ai.onnx``
operators only (:mod:`app.export.graph`). skl2onnx's calibrators have shipped wrong isotonic
outputs and a wrong sigmoid inside pipelines, so parity here is measured, not assumed: each
export runs its graph in the ``onnx`` package's reference evaluator (the operators'
semantics as the standard defines them) on the probes of :mod:`app.export.probes`, reports
the largest absolute difference from ``predict``, and refuses the export
(:class:`ExportError`) past :data:`PARITY_BOUND`. The evaluator is not a runtime's kernels:
the tests run every method's graph in ONNX Runtime too, which is how its optimiser's habit of
dropping a multiply by a float32 1 was found (:meth:`GraphBuilder.times`). A version adjusted
to new priors exports its method's graph followed by its Bayes steps
(:mod:`app.export.adjusted`), probed as its method is.

``dtype="float32"`` gives a graph with FLOAT inputs and outputs for FP32 pipelines: the
scores are widened to DOUBLE exactly, the same double graph runs, and each output is rounded
to the nearest float32, so it lies within :data:`FLOAT32_BOUND` of ``predict`` on the float32
scores. Rounding the scores to float32 beforehand is the caller's change of input: near a
step's knot it can move a score across it.

The graph expects the scores ``predict`` accepts (finite; for Boström, probability rows); it
has no error channel. A binary graph also answers +-inf (a float32 pipeline's logit of 0 or
1) and NaN as the calibrator's own ``predict`` does (the probes include them); a k-class
graph's answer to them is unspecified.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_exp import Exp
from onnx.reference.ops.op_log import Log

from app.calibration import (
    Calibrator,
    FloatArray,
    IntervalCalibrator,
    MulticlassCalibrator,
    PriorAdjusted,
    checkpoint,
)

from . import Dtype
from .adjusted import adjusted_outputs
from .binary import binary_outputs
from .graph import DOUBLE, FLOAT, ExportError, GraphBuilder, tensor
from .multiclass import multiclass_outputs
from .probes import probe_scores

PARITY_BOUND = 1e-12
"""The largest difference from ``predict`` a DOUBLE graph may show on its probes."""

FLOAT32_BOUND = 2.0**-25 + PARITY_BOUND
"""The same for a FLOAT graph on float32 scores: half a float32 ulp at 1 (outputs lie in
[0, 1]) on top of the DOUBLE graph's own difference."""

INPUT = "scores"

RUNTIME_ULPS = 2
"""How far a runtime's Exp and Log may stray from the C library's, in ulps, for the parity
figure to hold there too (ONNX Runtime's: one)."""

PROBE_ROWS = 1 << 16
PROBE_ENTRIES = 1 << 20
"""Probes are evaluated :data:`PROBE_ROWS` rows at a time, and fewer for many classes: at most
this many entries (rows x classes), 8 MB of float64 per array of the graph's evaluation."""


@dataclass(frozen=True)
class OnnxExport:
    """A serialised ONNX model, its sha256 (hex), its parity figure and the number of probes
    behind that figure."""

    model: bytes
    sha256: str
    parity: float
    probes_checked: int


def export_onnx(
    calibrator: Calibrator | MulticlassCalibrator,
    n_classes: int,
    *,
    dtype: Dtype = "float64",
    metadata: Mapping[str, str] | None = None,
) -> OnnxExport:
    """The ONNX model of a fitted calibrator of ``n_classes`` classes, checked against its
    ``predict`` (:class:`ExportError` past the bound, or for a method without a graph).
    ``metadata`` and the parity figure become the model's metadata properties."""
    element = FLOAT if dtype == "float32" else DOUBLE
    shape: list[str | int] = ["n"] if n_classes == 2 else ["n", n_classes]
    g = GraphBuilder()
    scores = g.op("Cast", INPUT, to=DOUBLE) if dtype == "float32" else INPUT
    # an adjusted version: its method's graph, then its Bayes steps
    adjusted = calibrator if isinstance(calibrator, PriorAdjusted) else None
    method = calibrator if adjusted is None else adjusted.base
    if n_classes == 2:
        outputs = binary_outputs(g, cast(Calibrator, method), scores)
    else:
        outputs = multiclass_outputs(g, cast(MulticlassCalibrator, method), scores, n_classes)
    if adjusted is not None:
        outputs = adjusted_outputs(g, outputs, adjusted.adjustments, n_classes)
    for name, value in outputs.items():
        g.rename(g.op("Cast", value, to=FLOAT) if dtype == "float32" else value, name)
    model = g.model(
        [tensor(INPUT, element, shape)],
        [tensor(name, element, shape) for name in outputs],
        name="calibrator",
        doc="Calibrated probabilities of scores, as the calibration service's predict.",
    )
    probes = probe_scores(method, n_classes)  # the Bayes steps are smooth: the method's
    element_type = np.float32 if dtype == "float32" else np.float64
    parity, checked = _parity(model, calibrator, probes, element_type)
    bound = FLOAT32_BOUND if dtype == "float32" else PARITY_BOUND
    if not parity <= bound:
        raise ExportError(
            f"its ONNX graph differs from predict by {parity:.3g} on {checked} probes, past "
            f"the bound {bound:.3g}"
        )
    props = {**(metadata or {}), "parity_max_abs_diff": repr(parity), "parity_probes": str(checked)}
    onnx.helper.set_model_props(model, props)
    data = model.SerializeToString()
    return OnnxExport(data, hashlib.sha256(data).hexdigest(), parity, checked)


def _parity(
    model: onnx.ModelProto,
    calibrator: Calibrator | MulticlassCalibrator,
    probes: FloatArray,
    element: type[np.floating[Any]],
) -> tuple[float, int]:
    """The largest |graph - predict| over every output on ``probes`` (rounded to ``element``
    first, and widened back for predict), and how many probes that is. NaN against NaN is no
    difference; NaN against a number is an infinite one.

    Runtimes compute Exp and Log to an ulp or so, not as the C library does (ONNX Runtime's
    Log differs from numpy's by one ulp on half its inputs), and a map can amplify that: a
    beta fit with a = 1.7e5 turns one ulp of ln f into 2e-10, and a temperature of 4.5e-5
    turns mixed ulps of near-equal logs into 2e-12. So a graph with Exp or Log is also
    evaluated twice with their results moved :data:`RUNTIME_ULPS` ulps up, down or not,
    element by element (:func:`_nudged`), and the largest difference of the three is the
    figure. Probes go through in chunks, so memory stays bounded whatever their number
    (10^6 isotonic thresholds give 6 x 10^6 probes)."""
    with np.errstate(over="ignore"):
        given = probes.astype(element)
    kept = np.isfinite(given) == np.isfinite(probes)  # 1e308 has no float32; inf stays inf
    given = given[kept if given.ndim == 1 else kept.all(axis=1)]
    names = [output.name for output in model.graph.output]
    transcendental = {node.op_type for node in model.graph.node} & {"Exp", "Log"}
    evaluators = [ReferenceEvaluator(model)]
    if transcendental:
        evaluators += [
            ReferenceEvaluator(model, new_ops=_nudged(pattern))
            for pattern in ((1, -1, 0), (-1, 1, 0))
        ]
    worst = 0.0
    rows = min(PROBE_ROWS, max(1, PROBE_ENTRIES // (1 if given.ndim == 1 else given.shape[1])))
    for start in range(0, len(given), rows):  # a loop over chunks, not probes
        checkpoint()  # the export is a job: over its budget, or its client gone, it stops here
        chunk = given[start : start + rows]
        widened = chunk.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):  # +-inf through a sigmoid of A = 0
            expected = {"probabilities": calibrator.predict(widened)}
        if "p0" in names:
            interval = cast(IntervalCalibrator, calibrator)
            expected["p0"], expected["p1"] = interval.predict_interval(widened)
        for evaluator in evaluators:
            with np.errstate(all="ignore"):  # masked branches (a division by an empty segment)
                answers = evaluator.run(None, {INPUT: chunk})
            for name, answer in zip(names, answers, strict=True):
                gap = largest_gap(np.asarray(answer, dtype=np.float64), expected[name])
                worst = max(worst, gap)
    return worst, len(given)


def _nudged(pattern: tuple[int, int, int]) -> list[type[OpRun]]:
    """Exp and Log whose results are moved :data:`RUNTIME_ULPS` floats up (+1), down (-1) or
    not (0), element by element in the cycle ``pattern``: a runtime errs element by element,
    and softmax cancels a common shift of every log but not a mixed one."""

    def nudge(base: type[OpRun]) -> type[OpRun]:
        class Nudged(base):  # type: ignore[misc,valid-type]
            op_domain = ""

            def _run(self, x: Any) -> tuple[Any]:
                (y,) = super()._run(x)
                up, down = y, y
                for _ in range(RUNTIME_ULPS):
                    up, down = np.nextafter(up, np.inf), np.nextafter(down, -np.inf)
                way = np.resize(np.array(pattern), y.size).reshape(y.shape)
                return (np.where(way > 0, up, np.where(way < 0, down, y)).astype(y.dtype),)

        Nudged.__name__ = base.__name__  # the evaluator finds an operator by its class name
        return Nudged

    return [nudge(Exp), nudge(Log)]


def largest_gap(got: FloatArray, want: FloatArray) -> float:
    """max |got - want|, where NaN against NaN counts 0 and NaN against a number inf."""
    with np.errstate(invalid="ignore"):
        gap = np.abs(got - want)
    both = np.isnan(got) & np.isnan(want)
    gap[np.isnan(gap) & ~both] = np.inf
    gap[both] = 0.0
    return float(np.max(gap, initial=0.0))
