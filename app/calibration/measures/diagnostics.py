"""One entry point for the measures, binary (vectors) or multiclass (n x k matrices).

The service asks for a version's headline metrics and reliability report without caring how
many classes there are; this module picks :mod:`app.calibration.measures.metrics` or
:mod:`app.calibration.measures.multiclass_metrics` by the shape of the probabilities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import CalibrationError, FloatArray
from app.calibration.kernels.budget import in_context
from app.calibration.kernels.checks import check_probabilities
from app.calibration.kernels.weights import relative_weights
from app.calibration.measures.auc import roc_auc_checked
from app.calibration.measures.block_resampled import BlockResampler
from app.calibration.measures.block_sums import Blocks, BlockTables, block_tables
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
from app.calibration.measures.report import Report, SmoothCurve, smooth_curve_of, view_measures
from app.calibration.measures.report_bootstrap import Resampled, SharedResamples, bootstrap
from app.calibration.measures.resampled import View, ViewResampler


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
) -> list[Report]:
    """The reports of several sets of probabilities for one labelled batch (a version's and
    the raw scores', say), with intervals from one set of ``resamples`` bootstrap resamples
    shared by all (0: no intervals). ``n_bins`` may be ``"auto"`` (:func:`auto_bins`)."""
    check_resamples(resamples)
    outcome = _outcome(probability_sets, labels)
    prepared = [
        _report_and_view(p, labels, weights, class_index, outcome) for p in probability_sets
    ]
    bins = _bins(n_bins, prepared[0][1].w) if prepared else MIN_BINS
    out: list[Report] = []
    views: list[View] = []
    edges: list[FloatArray] = []
    for summarise, view in prepared:
        report = summarise(bins, strategy)
        report.metrics.update(view_measures(view, bins))
        out.append(report)
        views.append(view)
        edges.append(report.bins.upper[:-1])
    resampled = bootstrap(views, edges, [r.metrics for r in out], resamples)
    return [
        replace(r, intervals=s.intervals, smooth=_smooth(view, r.metrics, s))
        for r, view, s in zip(out, views, resampled, strict=True)
    ]


def _smooth(view: View, metrics: dict[str, Any], resampled: Resampled) -> SmoothCurve | None:
    sigma = metrics.get("smooth_ece_sigma")
    return None if sigma is None else smooth_curve_of(view, sigma, resampled.band)


THREADED_ROWS = 100_000
"""Rows from which each set of :class:`HeadlineReports` is prepared in a thread of its own,
whose sorts and sums release the GIL: two sets of 10^6 rows took 0.10 s instead of 0.18 s
(measured), on a core the fit's worker would otherwise leave idle."""

HEADLINE_EDGES = np.linspace(0.0, 1.0, 11)[1:-1]
"""The headline ECE's bins: 10 of equal width."""

T = TypeVar("T")

Prepared = tuple[dict[str, Any], ViewResampler | BlockResampler | None, View | None]
"""A set's headline metrics, its sampler and its view (None without resamples)."""


class HeadlineReports:
    """The :func:`headline` metrics of several sets of probabilities for one labelled batch,
    with intervals from one set of shared resamples (:class:`SharedResamples`: paired, a
    difference between two sets' values on a resample is the difference on that resample).

    Each set is prepared as soon as the caller has it (:meth:`add`), in a thread of its own
    from :data:`THREADED_ROWS` rows: a fit adds its raw scores before it fits, so their report
    is made on the core the fit leaves idle. Used as a context manager, which waits for the
    threads however it is left; :meth:`results` gives the metrics and intervals in the order
    the sets were added.

    From :data:`~app.calibration.measures.report_bootstrap.LARGE_ROWS` rows a binary set's log
    loss, Brier score and ECE are read off the block sums its bootstrap needs anyway
    (:meth:`~app.calibration.measures.block_sums.BlockTables.mean`), one pass over the rows
    instead of two (they agree to the last few bits: the sums are taken in another order).
    """

    def __init__(
        self, labels: NDArray[np.int64], weights: FloatArray | None, resamples: int = RESAMPLES
    ) -> None:
        check_resamples(resamples)
        self.labels, self.weights = labels, weights
        self.shared = SharedResamples(labels.size, resamples) if resamples else None
        self._outcome: FloatArray | None = None
        self._pool = ThreadPoolExecutor(2) if labels.size >= THREADED_ROWS else None
        self._prepared: list[Callable[[], Prepared]] = []

    def __enter__(self) -> HeadlineReports:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def add(self, probabilities: FloatArray, *, background: bool = False) -> None:
        """Prepare the metrics of one more set, in threads from :data:`THREADED_ROWS` rows. A
        large binary set is checked here (a :class:`CalibrationError` now), and its block sums
        and its AUC's sort then run side by side, unless in the ``background`` of work the
        caller goes on with (a fit), where they take one thread: beside a third they slowed
        an isotonic fit of 10^6 rows by 0.1 s (measured). Any other set's error comes from
        :meth:`results`."""
        labels, weights, shared = self.labels, self.weights, self.shared
        if probabilities.ndim == 1 and self._outcome is None:
            self._outcome = _outcome([probabilities], labels)
        if shared is None or shared.blocks is None or probabilities.ndim != 1:
            whole = self._run(self._prepare, probabilities, self._outcome)
            self._prepared.append(whole.result)
            return
        view = _report_and_view(probabilities, labels, weights, None, self._outcome)[1]
        blocks, seed = shared.blocks, shared.seed
        if background:
            both = self._run(_from_view, view, blocks, seed)
            self._prepared.append(both.result)
            return
        tables = self._run(_headline_tables, view, blocks)
        auc = self._run(roc_auc_checked, view.p, view.y != 0.0, view.w)
        self._prepared.append(lambda: _from_tables(tables.result(), auc.result(), view, seed))

    def results(self) -> tuple[list[dict[str, Any]], list[Resampled]]:
        """Every set's metrics and resamples, in the order of :meth:`add` (the first error of
        any set's preparation raised here)."""
        prepared = [result() for result in self._prepared]
        points = [point for point, _, _ in prepared]
        if self.shared is None:
            return points, [Resampled({}, {}) for _ in prepared]
        samplers = [sampler for _, sampler, _ in prepared if sampler is not None]
        views = [view for _, _, view in prepared if view is not None]
        return points, self.shared.resampled(samplers, views, points)

    def _run(self, function: Callable[..., T], *args: Any) -> Future[T]:
        """``function(*args)`` in the pool's threads, in the job's context (its budget), or
        here and now below :data:`THREADED_ROWS` rows."""
        task = in_context(function)
        if self._pool is not None:
            return self._pool.submit(task, *args)
        done: Future[T] = Future()
        try:
            done.set_result(task(*args))
        except BaseException as exc:  # raised by results(), as a thread's would be
            done.set_exception(exc)
        return done

    def _prepare(self, probabilities: FloatArray, outcome: FloatArray | None) -> Prepared:
        """A set's metrics, sampler and view, but for a large binary set's (:meth:`add`)."""
        labels, weights, shared = self.labels, self.weights, self.shared
        point = headline(probabilities, labels, weights)
        if shared is None:
            return point, None, None
        view = _report_and_view(probabilities, labels, weights, None, outcome)[1]
        return point, shared.sampler(view, HEADLINE_EDGES, point), view


def _headline_tables(view: View, blocks: Blocks) -> BlockTables:
    """The block sums of a binary view's headline measures (its AUC's exact value comes
    later, from its own sort: :func:`_from_tables`)."""
    return block_tables(
        view,
        HEADLINE_EDGES,
        blocks,
        auc=None,
        line=None,
        offset_intercept=None,
        smooth=False,
        smooth_sigma=None,
    )


def _from_view(view: View, blocks: Blocks, seed: int) -> Prepared:
    """:func:`_from_tables` of a view, its block sums and then its AUC."""
    tables = _headline_tables(view, blocks)
    return _from_tables(tables, roc_auc_checked(view.p, view.y != 0.0, view.w), view, seed)


def _from_tables(tables: BlockTables, auc: float | None, view: View, seed: int) -> Prepared:
    """A large binary set's headline metrics read off its block sums, its exact AUC beside
    them, and its sampler of blocks."""
    point: dict[str, Any] = {
        "brier": tables.mean("brier"),
        "log_loss": tables.mean("log_loss"),
        "ece": tables.binned_ece(),
        "auc": auc,
    }
    tables = replace(tables, auc=np.nan if auc is None else auc)
    sampler = BlockResampler(tables, line=None, offset_intercept=None, smooth_sigma=None, seed=seed)
    return point, sampler, view


def headline_resampled(
    probability_sets: Sequence[FloatArray],
    labels: NDArray[np.int64],
    weights: FloatArray | None,
    resamples: int = RESAMPLES,
) -> tuple[list[dict[str, Any]], list[Resampled]]:
    """The :func:`headline` metrics of several sets of probabilities for one labelled batch,
    and their intervals and values on one set of shared resamples (:class:`HeadlineReports`,
    every set known at once)."""
    with HeadlineReports(labels, weights, resamples) as reports:
        for probabilities in probability_sets:
            reports.add(probabilities)
        return reports.results()


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


Summariser = Callable[[int, str], Report]


def _outcome(
    probability_sets: Sequence[FloatArray], labels: NDArray[np.int64]
) -> FloatArray | None:
    """The labels as the 0/1 floats every binary view of the batch reads: one array for all
    the sets (45 MB at 6 x 10^6 rows); None for matrices, whose views make their own."""
    if not probability_sets or np.ndim(probability_sets[0]) != 1:
        return None
    return labels.astype(np.float64)


def _report_and_view(
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

        def summarise_multiclass(bins: int, strategy: str) -> Report:
            return summarize_multiclass(
                P, y, w, n_bins=bins, strategy=strategy, class_index=class_index
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

    def summarise_binary(bins: int, strategy: str) -> Report:
        return summarize(p, positive, w, n_bins=bins, strategy=strategy)

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
