"""A reliability report: bins, measures and their 95% intervals, as one typed, array-backed value.

A report reads a labelled batch through a :class:`~app.calibration.resampled.View` (binary;
top-label or one class against the rest for multiclass) and holds what the diagnostics answer:
the reliability bins (:class:`~app.calibration.reliability.Bins`), the measures of
:mod:`app.calibration.metrics` and :mod:`app.calibration.measures`, and the bootstrap intervals
of the headline ones. The API serialises it once (:meth:`Report.as_json`); the diagrams read
its arrays directly.

Reports of one batch (a version's calibrated probabilities and the raw scores; several
versions in a comparison) share one set of resamples: :func:`bootstrap` draws each chunk of
counts once and hands it to every view, so their intervals, and differences between them, come
from the same resampled rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from app.calibration.base import FloatArray, JSONValue
from app.calibration.bootstrap import (
    Interval,
    Resamples,
    calibration_error_interval,
    consistent_labels,
    percentile_interval,
)
from app.calibration.budget import checkpoint, in_context
from app.calibration.measures import (
    calibration_intercept,
    calibration_line,
    ece_debiased,
    spiegelhalter,
)
from app.calibration.reliability import Bins
from app.calibration.resampled import View, ViewResampler

CALIBRATION_ERRORS = ("ece", "smooth_ece")
"""Measures whose interval is :func:`~app.calibration.bootstrap.calibration_error_interval`."""
PERCENTILE = ("log_loss", "brier", "accuracy", "auc", "calibration_slope", "calibration_intercept")
"""Measures whose interval is the percentile interval."""


@dataclass(frozen=True)
class SmoothCurve:
    """The kernel-smoothed reliability curve at bandwidth ``sigma`` on a mesh ``x`` of [0, 1]:
    fraction of positives ``y``, its pointwise 95% band (bootstrap percentiles), and the
    density of the predictions."""

    sigma: float
    x: FloatArray
    y: FloatArray
    low: FloatArray | None
    high: FloatArray | None
    density: FloatArray

    def as_json(self) -> dict[str, JSONValue]:
        """The curve as JSON lists (``low`` and ``high`` null without resamples)."""

        def listed(values: FloatArray | None) -> JSONValue:
            return None if values is None else [float(v) for v in values]

        return {
            "sigma": self.sigma,
            "x": listed(self.x),
            "y": listed(self.y),
            "low": listed(self.low),
            "high": listed(self.high),
            "density": listed(self.density),
        }


@dataclass(frozen=True)
class Report:
    """One report: the bins, the measures (None where undefined) and their intervals."""

    bins: Bins
    metrics: dict[str, float | None]
    intervals: dict[str, Interval] = field(default_factory=dict)
    smooth: SmoothCurve | None = None

    def as_json(self) -> dict[str, JSONValue]:
        """``{"bins": [...], "metrics": {..., "intervals": {name: [low, high]}}}`` (and
        ``"smooth"`` when there is a smooth curve)."""
        metrics: dict[str, JSONValue] = dict(self.metrics)
        if self.intervals:
            metrics["intervals"] = {k: [low, high] for k, (low, high) in self.intervals.items()}
        out: dict[str, JSONValue] = {
            "bins": [row.as_dict() for row in self.bins.rows()],
            "metrics": metrics,
        }
        if self.smooth is not None:
            out["smooth"] = self.smooth.as_json()
        return out


def view_measures(view: View, n_bins: int) -> dict[str, float | None]:
    """The measures beyond the binned ones, for one view: the debiased L2 error on ``n_bins``
    equal-mass bins (unweighted batches only: Kumar et al.'s estimator counts rows), the
    calibration slope and intercept, and Spiegelhalter's test."""
    p, y, w = view.p, view.y, view.w
    unweighted = bool(w.min() == w.max())
    test = spiegelhalter(p, y, w)
    return {
        "ece_debiased": ece_debiased(p, y, n_bins) if unweighted else None,
        "calibration_slope": None if (line := calibration_line(p, y, w)) is None else line.slope,
        "calibration_intercept": calibration_intercept(p, y, w),
        "spiegelhalter_z": None if test is None else test.z,
        "spiegelhalter_p": None if test is None else test.p_value,
    }


def bootstrap(
    views: Sequence[View],
    inner_edges: Sequence[FloatArray],
    points: Sequence[dict[str, float | None]],
    resamples: int,
    seed: int | None = None,
    n_jobs: int = 2,
) -> list[dict[str, Interval]]:
    """The 95% interval of each headline measure of each view, from one set of ``resamples``
    Poisson resamples of the batch's rows shared by all views (and as many consistency
    resamples for the calibration errors' test at 0). ``points`` holds each view's measured
    values; a measure without one (None) gets no interval."""
    if resamples == 0 or not views:
        return [{} for _ in views]
    n = views[0].p.size
    draws = Resamples(n, resamples) if seed is None else Resamples(n, resamples, seed)
    samplers = []
    for view, edges, point in zip(views, inner_edges, points, strict=True):
        line = calibration_line(view.p, view.y, view.w)
        intercept = point.get("calibration_intercept")
        samplers.append(ViewResampler(view, edges, line=line, offset_intercept=intercept))

    def chunk(start: int, stop: int) -> list[tuple[dict[str, FloatArray], dict[str, FloatArray]]]:
        checkpoint()
        counts, uniforms = draws.counts(start, stop), draws.uniforms(start, stop)
        return [
            (sampler.statistics(counts), sampler.consistent(consistent_labels(uniforms, view.p)))
            for sampler, view in zip(samplers, views, strict=True)
        ]

    # Chunks in threads, numpy's loops and the sparse products releasing the GIL, and BLAS
    # in one thread each: its threads cost more than they give on these narrow products
    # (measured: 0.80 s against 1.07 s for both reports of 10^5 rows, 1000 resamples).
    with threadpool_limits(limits=1, user_api="blas"):
        per_chunk = Parallel(n_jobs=n_jobs, prefer="threads")(
            delayed(in_context(chunk))(start, stop) for start, stop in draws.spans()
        )
    values: list[dict[str, FloatArray]] = [{} for _ in views]
    consistent: list[dict[str, FloatArray]] = [{} for _ in views]
    for (start, _), per_view in zip(draws.spans(), per_chunk, strict=True):
        for into, null, (statistics, on_null) in zip(values, consistent, per_view, strict=True):
            _append(into, statistics, resamples, start)
            _append(null, on_null, resamples, start)
    return [_intervals(*found) for found in zip(points, values, consistent, strict=True)]


def _intervals(
    point: dict[str, float | None],
    resampled: dict[str, FloatArray],
    consistent: dict[str, FloatArray],
) -> dict[str, Interval]:
    """Each measured headline measure's interval from its values on the resamples."""
    found: dict[str, Interval] = {}
    for name, values in resampled.items():
        value = point.get(name)
        interval: Interval | None = None
        if value is None:
            continue
        if name in CALIBRATION_ERRORS:
            interval = calibration_error_interval(value, values, consistent[name])
        elif name in PERCENTILE:
            interval = percentile_interval(values)
        if interval is not None:
            found[name] = interval
    return found


def _append(
    into: dict[str, FloatArray], chunk: dict[str, FloatArray], total: int, start: int
) -> None:
    for name, values in chunk.items():
        if name not in into:
            into[name] = np.full(total, np.nan)
        into[name][start : start + values.size] = values
