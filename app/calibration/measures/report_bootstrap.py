"""The bootstrap of reliability reports: one set of resamples for every view of a batch.

Reports of one batch (a version's calibrated probabilities and the raw scores; several
versions in a comparison) share one set of resamples: :func:`bootstrap` draws each chunk of
counts once and hands it to every view, so their intervals, and differences between them, come
from the same resampled rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import checkpoint, in_context
from app.calibration.measures.bootstrap import (
    LEVEL,
    Interval,
    Resamples,
    calibration_error_interval,
    consistent_labels,
    percentile_interval,
)
from app.calibration.measures.clinical import (
    calibration_line,
)
from app.calibration.measures.report import Band
from app.calibration.measures.resampled import View, ViewResampler
from app.calibration.measures.smooth_ece import SmoothEceResampler

CALIBRATION_ERRORS = ("ece", "smooth_ece")
"""Measures whose interval is
:func:`~app.calibration.measures.bootstrap.calibration_error_interval`."""
VIEWS_AT_ONCE = 2
"""Views resampled together (a version's calibrated and raw reports)."""
THREADED_ENTRIES = 5 * 10**5
"""Rows x resamples from which chunks run in threads when the smooth ECE is not resampled:
below it joblib's dispatch costs more than a second core gives (measured, both headline
reports with 1000 resamples: 10^2 rows, 14 ms threaded and 5 ms in line; 10^3 rows, 27 ms and
35 ms). The smooth ECE's chunks gain from threads at any size."""
SMOOTH_RESAMPLES = 1000
"""Resamples behind the smooth ECE's interval and its curve's band at most (the first chunks'):
its width search costs a few FFTs per resample, on grids of up to 10^4 points when the width
is small, so more resamples than the default would cost seconds, not precision."""
CONSISTENCY_RESAMPLES = 200
"""Consistency resamples behind the calibration errors' test at 0 at most (the first chunks'):
a 95% quantile of 200 draws is within a few percent of that of 1000, and the smooth ECE's
values there cost the most (a calibrated model's width is small: finer grids)."""
PERCENTILE = ("log_loss", "brier", "accuracy", "auc", "calibration_slope", "calibration_intercept")
"""Measures whose interval is the percentile interval."""


@dataclass(frozen=True)
class Resampled:
    """A view's intervals, each measure's values on the resamples (for paired differences
    between views of one batch), and the band of its smoothed curve."""

    intervals: dict[str, Interval]
    values: dict[str, FloatArray]
    band: Band | None = None


def bootstrap(
    views: Sequence[View],
    inner_edges: Sequence[FloatArray],
    points: Sequence[dict[str, float | None]],
    resamples: int,
    seed: int | None = None,
    n_jobs: int = 2,
) -> list[Resampled]:
    """The 95% interval of each measure of each view that has one, and its values on the
    resamples, from one set of ``resamples`` Poisson resamples of the batch's rows shared by
    all views (and, in the first chunks, up to CONSISTENCY_RESAMPLES consistency resamples for
    the calibration errors' test at 0).
    ``points`` holds each view's measured values: a measure without one (None or absent)
    gets no interval; the slope, intercept and smooth ECE are resampled only where measured,
    and the smoothed curve (its band) where ``smooth_ece_sigma`` is given.

    Views are resampled :data:`VIEWS_AT_ONCE` at a time, each group drawing the same seeded
    chunks again: a comparison of 50 versions holds two views' matrices, not fifty."""
    if resamples == 0 or not views:
        return [Resampled({}, {}) for _ in views]
    n = views[0].p.size
    draws = Resamples(n, resamples) if seed is None else Resamples(n, resamples, seed)
    out: list[Resampled] = []
    for first in range(0, len(views), VIEWS_AT_ONCE):  # a loop over groups of views
        group = slice(first, first + VIEWS_AT_ONCE)
        out += _resampled(views[group], inner_edges[group], points[group], draws, n_jobs)
    return out


def _resampled(
    views: Sequence[View],
    inner_edges: Sequence[FloatArray],
    points: Sequence[dict[str, float | None]],
    draws: Resamples,
    n_jobs: int,
) -> list[Resampled]:
    """:func:`bootstrap` for one group of views, which share each chunk's counts."""
    samplers = [
        _sampler(view, edges, point)
        for view, edges, point in zip(views, inner_edges, points, strict=True)
    ]

    def chunk(start: int, stop: int) -> list[tuple[dict[str, FloatArray], dict[str, FloatArray]]]:
        checkpoint()
        counts = draws.counts(start, stop)
        smooth = start < SMOOTH_RESAMPLES
        if start >= CONSISTENCY_RESAMPLES:
            return [(sampler.statistics(counts, smooth), {}) for sampler in samplers]
        # the consistency resamples: the first CONSISTENCY_RESAMPLES columns only
        uniforms = draws.uniforms(start, stop)[:, : CONSISTENCY_RESAMPLES - start]
        return [
            (
                sampler.statistics(counts, smooth),
                sampler.consistent(consistent_labels(uniforms, view.p)),
            )
            for sampler, view in zip(samplers, views, strict=True)
        ]

    # Chunks in threads, numpy's loops and the sparse products releasing the GIL, and BLAS
    # in one thread each: its threads cost more than they give on these narrow products
    # (measured: 0.80 s against 1.07 s for both reports of 10^5 rows, 1000 resamples). The
    # job's context is copied here, in its own thread (see :func:`in_context`).
    in_job = in_context(chunk)
    smooth = any(point.get("smooth_ece") is not None for point in points)
    threads = n_jobs if smooth or draws.n * draws.count >= THREADED_ENTRIES else 1
    with threadpool_limits(limits=1, user_api="blas"):
        if threads == 1:
            per_chunk = [in_job(start, stop) for start, stop in draws.spans()]
        else:
            per_chunk = Parallel(n_jobs=threads, prefer="threads")(
                delayed(in_job)(start, stop) for start, stop in draws.spans()
            )
    resamples = draws.count
    values: list[dict[str, FloatArray]] = [{} for _ in views]
    consistent: list[dict[str, FloatArray]] = [{} for _ in views]
    for (start, _), per_view in zip(draws.spans(), per_chunk, strict=True):
        for into, null, (statistics, on_null) in zip(values, consistent, per_view, strict=True):
            _append(into, statistics, resamples, start)
            _append(null, on_null, resamples, start)
    smoothed = min(resamples, SMOOTH_RESAMPLES)  # the smooth ECE's: within the chunks it read
    out = []
    for point, found, null in zip(points, values, consistent, strict=True):
        if "smooth_ece" in found:
            found["smooth_ece"] = found["smooth_ece"][:smoothed]
        curves = found.pop("smooth_curve", None)
        curves = None if curves is None else curves[:smoothed]
        out.append(Resampled(_intervals(point, found, null), found, _band(curves)))
    return out


def _sampler(view: View, edges: FloatArray, point: dict[str, float | None]) -> ViewResampler:
    """The view's resampler, for the measures ``point`` has."""
    measured = point.get("calibration_slope") is not None
    smooth = point.get("smooth_ece") is not None
    return ViewResampler(
        view,
        edges,
        line=calibration_line(view.p, view.y, view.w) if measured else None,
        offset_intercept=point.get("calibration_intercept"),
        smooth=SmoothEceResampler(view.p, view.y, view.w) if smooth else None,
        smooth_sigma=point.get("smooth_ece_sigma"),
    )


def _band(curves: FloatArray | None) -> Band | None:
    """The pointwise 2.5% and 97.5% quantiles of the resampled curves (resamples x mesh),
    relplot's band; None without curves."""
    if curves is None:
        return None
    with np.errstate(invalid="ignore"):
        low, high = np.nanquantile(curves, [(1.0 - LEVEL) / 2.0, (1.0 + LEVEL) / 2.0], axis=0)
    return low, high


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
            into[name] = np.full((total, *values.shape[1:]), np.nan)
        into[name][start : start + values.shape[0]] = values
