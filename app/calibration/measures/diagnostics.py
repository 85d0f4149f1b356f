"""One entry point for the measures, binary (vectors) or multiclass (n x k matrices).

The service asks for a version's headline metrics and reliability report without caring how
many classes there are; this module picks :mod:`app.calibration.measures.metrics` or
:mod:`app.calibration.measures.multiclass_metrics` by the shape of the probabilities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import CalibrationError, FloatArray
from app.calibration.kernels.checks import check_probabilities
from app.calibration.kernels.weights import relative_weights
from app.calibration.measures.bootstrap import RESAMPLES, check_resamples
from app.calibration.measures.metrics import (
    headline_metrics,
    log_losses,
    scale_raw_scores,
    squared_errors,
    summarize,
)
from app.calibration.measures.multiclass_metrics import (
    brier_distances,
    check_multiclass_batch,
    headline_multiclass,
    multiclass_log_losses,
    raw_probabilities,
    summarize_multiclass,
)
from app.calibration.measures.reliability import MAX_BINS, MIN_BINS
from app.calibration.measures.report import (
    BinFree,
    Report,
    SmoothCurve,
    smooth_curve_of,
    view_measures,
)
from app.calibration.measures.report_bootstrap import LARGE_ROWS, Resampled, bootstrap
from app.calibration.measures.resampled import View


def raw_as_probabilities(scores: FloatArray) -> FloatArray:
    """The raw scores as probabilities for their "before" report: min-max scaled margins
    (binary, as the paper does for SVMs), or the rows themselves / their softmax (multiclass)."""
    return raw_probabilities(scores) if scores.ndim == 2 else scale_raw_scores(scores)


def headline(
    probabilities: FloatArray, labels: NDArray[np.int64], weights: FloatArray | None
) -> dict[str, Any]:
    """The metrics stored with a version (``metrics.cv`` and ``metrics.raw``)."""
    if probabilities.ndim == 2:
        return headline_multiclass(probabilities, labels, weights)
    return headline_metrics(probabilities, labels.astype(np.float64), weights)


def reliability_report(
    probabilities: FloatArray,
    labels: NDArray[np.int64],
    weights: FloatArray | None,
    *,
    n_bins: int,
    strategy: str,
    class_index: int | None = None,
) -> Report:
    """Reliability bins and measures without intervals: binary, top-label (multiclass) or one
    class against the rest (``class_index``); see :func:`reliability_reports`."""
    (report,) = reliability_reports(
        [probabilities],
        labels,
        weights,
        n_bins=n_bins,
        strategy=strategy,
        class_index=class_index,
        resamples=0,
    )
    return report


def reliability_reports(
    probability_sets: Sequence[FloatArray],
    labels: NDArray[np.int64],
    weights: FloatArray | None,
    *,
    n_bins: int | str,
    strategy: str,
    class_index: int | None = None,
    resamples: int = RESAMPLES,
    known: Sequence[BinFree] | None = None,
) -> list[Report]:
    """The reports of several sets of probabilities for one labelled batch (a version's and
    the raw scores', say), with intervals from one set of ``resamples`` bootstrap resamples
    shared by all (0: no intervals). ``n_bins`` may be ``"auto"`` (:func:`auto_bins`).

    ``known``, the :class:`~app.calibration.measures.report.BinFree` parts of each set's
    report for other bins (same batch, class and resamples), spares what the bins do not
    change where :func:`reuses_bin_free` says so: only the binned measures are computed and
    resampled, and the reports equal those made without it."""
    check_resamples(resamples)
    outcome = outcome_floats(probability_sets, labels)
    prepared = [report_and_view(p, labels, weights, class_index, outcome) for p in probability_sets]
    bins = _bins(n_bins, prepared[0][1].w) if prepared else MIN_BINS
    reuse = _reusable(known, len(prepared), labels.size, class_index, resamples)
    whole = reuse is None
    out: list[Report] = []
    views: list[View] = []
    edges: list[FloatArray] = []
    for summarise, view in prepared:
        report = summarise(bins, strategy, whole)
        report.metrics.update(view_measures(view, bins, with_bin_free=whole))
        out.append(report)
        views.append(view)
        edges.append(report.bins.upper[:-1])
    resampled = bootstrap(views, edges, [r.metrics for r in out], resamples)
    out = [
        replace(r, intervals=s.intervals, smooth=_smooth(view, r.metrics, s))
        for r, view, s in zip(out, views, resampled, strict=True)
    ]
    return out if reuse is None else [k.completed(r) for k, r in zip(reuse, out, strict=True)]


def reuses_bin_free(n: int, resamples: int) -> bool:
    """Whether :func:`reliability_reports` of ``n`` rows with ``resamples`` resamples reads
    the measures its bins do not change from the ``known`` parts of another report: from
    :data:`~app.calibration.measures.report_bootstrap.LARGE_ROWS` rows, or without resamples.
    Below, the row bootstrap's AUC reads atoms cut at the bins' edges, so its resamples
    depend on the bins (and a whole report of so few rows costs little)."""
    return resamples == 0 or n >= LARGE_ROWS


def _reusable(
    known: Sequence[BinFree] | None, sets: int, n: int, class_index: int | None, resamples: int
) -> Sequence[BinFree] | None:
    """``known`` where :func:`reliability_reports` reuses it, else None."""
    if known is None:
        return None
    made = {(k.n, k.class_index, k.resamples) for k in known}
    if len(known) != sets or made != {(n, class_index, resamples)}:
        raise ValueError(
            "known must hold one BinFree per set, of the same rows, class and resamples"
        )
    return known if reuses_bin_free(n, resamples) else None


def _smooth(view: View, metrics: dict[str, Any], resampled: Resampled) -> SmoothCurve | None:
    sigma = metrics.get("smooth_ece_sigma")
    return None if sigma is None else smooth_curve_of(view, sigma, resampled.band)


def fit_resamples(n: int) -> int:
    """The resamples behind a version's stored intervals for a batch of ``n`` rows: always
    :data:`~app.calibration.measures.bootstrap.RESAMPLES`. Up to
    :data:`~app.calibration.measures.report_bootstrap.LARGE_ROWS` rows the row bootstrap's
    rows x resamples stay under 2 x 10^7; from there the bootstrap reads per-block sums, whose
    cost does not grow with the rows (before them, 200 resamples at 10^6 rows cost 2.3 s and
    50 at 10^7 rows 11 s, measured)."""
    return RESAMPLES


def with_intervals(metrics: dict[str, Any], resampled: Resampled) -> dict[str, Any]:
    """The metrics with their intervals beside them, as every metrics object carries them."""
    if not resampled.intervals:
        return metrics
    return {**metrics, "intervals": {k: list(v) for k, v in resampled.intervals.items()}}


def auto_bins(weights: FloatArray) -> int:
    """``n_bins=auto``: the smallest k with k^3 >= the batch's effective size, clipped to
    2..100, ceil(n^(1/3)): the cube-root rule (Sun et al., NeurIPS 2023; proposed for
    scikit-learn's ``calibration_curve`` in its issue #33658). The effective size is Kish's
    (sum w)^2 / sum w^2, the row count for equal weights."""
    w, _ = relative_weights(weights)
    size = float(w.sum()) ** 2 / float(w @ w)
    size *= 1.0 - 1e-12  # a size of 27 computed as 27.000000000000004 is still 3^3
    k = max(1, round(size ** (1.0 / 3.0)))  # within one of the answer: correct it
    if k**3 < size:
        k += 1
    elif (k - 1) ** 3 >= size:
        k -= 1
    return int(min(max(k, MIN_BINS), MAX_BINS))


def _bins(n_bins: int | str, weights: FloatArray) -> int:
    if n_bins == "auto":
        return auto_bins(weights)
    if not isinstance(n_bins, int):
        raise CalibrationError(f"must be an integer or auto, not {n_bins!r}", loc=("n_bins",))
    return n_bins


Summariser = Callable[[int, str, bool], Report]
"""A view's bins and binned measures for ``n_bins`` and ``strategy``, and with the third
argument true the measures the bins do not change."""


def outcome_floats(
    probability_sets: Sequence[FloatArray], labels: NDArray[np.int64]
) -> FloatArray | None:
    """The labels as the 0/1 floats every binary view of the batch reads: one array for all
    the sets (45 MB at 6 x 10^6 rows); None for matrices, whose views make their own."""
    if not probability_sets or np.ndim(probability_sets[0]) != 1:
        return None
    return labels.astype(np.float64)


def report_and_view(
    probabilities: FloatArray,
    labels: NDArray[np.int64],
    weights: FloatArray | None,
    class_index: int | None,
    outcome: FloatArray | None = None,
) -> tuple[Summariser, View]:
    """How to summarise the probabilities for given bins, and the view the other measures
    and the bootstrap read: binary, top-label, or one class against the rest (``outcome``:
    the labels as floats, shared by the binary views of one batch)."""
    if probabilities.ndim == 2:
        P, y, w = check_multiclass_batch(probabilities, labels, weights)
        k = P.shape[1]
        if class_index is not None and not 0 <= class_index < k:
            raise CalibrationError(f"is {class_index}; expected 0..{k - 1}", loc=("class_index",))

        def summarise_multiclass(bins: int, strategy: str, whole: bool) -> Report:
            return summarize_multiclass(
                P,
                y,
                w,
                n_bins=bins,
                strategy=strategy,
                class_index=class_index,
                with_bin_free=whole,
            )

        top = np.argmax(P, axis=1)
        correct = (top == y).astype(np.float64)
        if class_index is None:
            confidence = P[np.arange(y.size), top]

            def top_terms(rows: slice) -> dict[str, FloatArray]:
                return {
                    "log_loss": multiclass_log_losses(P[rows], y[rows]),
                    "brier": brier_distances(P[rows], y[rows]),
                    "accuracy": correct[rows],
                }

            return summarise_multiclass, _view(confidence, correct, w, top_terms)
        column, rest = P[:, class_index], (y == class_index).astype(np.float64)

        def column_terms(rows: slice) -> dict[str, FloatArray]:
            return {**_binary_terms(column, rest)(rows), "accuracy": correct[rows]}

        return summarise_multiclass, _view(column, rest, w, column_terms)
    if class_index not in (None, 0, 1):
        raise CalibrationError(
            f"is {class_index}; a binary calibrator has classes 0, 1", loc=("class_index",)
        )
    if outcome is None:
        outcome = labels.astype(np.float64)
    if class_index == 0:
        probabilities, outcome = 1.0 - probabilities, 1.0 - outcome
    p, positive, w = check_probabilities(probabilities, outcome, weights)

    def summarise_binary(bins: int, strategy: str, whole: bool) -> Report:
        return summarize(p, positive, w, n_bins=bins, strategy=strategy, with_bin_free=whole)

    return summarise_binary, _view(p, positive, w, _binary_terms(p, positive))


def _binary_terms(p: FloatArray, y: FloatArray) -> Callable[[slice], dict[str, FloatArray]]:
    def terms(rows: slice) -> dict[str, FloatArray]:
        return {"log_loss": log_losses(p[rows], y[rows]), "brier": squared_errors(p[rows], y[rows])}

    return terms


def _view(
    p: FloatArray, y: FloatArray, w: FloatArray, terms: Callable[[slice], dict[str, FloatArray]]
) -> View:
    """The view, its weights relative (:func:`relative_weights`; equal weights stay a
    broadcast of 1, with no array of their own)."""
    if w.min() == w.max():
        return View(p, y, np.broadcast_to(1.0, w.shape), terms)
    relative, _ = relative_weights(w)
    return View(p, y, relative, terms)
