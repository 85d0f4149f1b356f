"""A version's stored metrics: the headline measures of several sets of probabilities for one
labelled batch (its out-of-fold predictions and its raw scores; the versions of a comparison),
with intervals from one set of shared resamples.

A fit knows its sets at different times (the raw scores before it fits, the out-of-fold
predictions before its final fit), so :class:`HeadlineReports` takes each as it comes and
prepares it on the core the fit leaves idle: at 10^6 pairs the fit's request no longer waits
for most of its report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.kernels.budget import in_context
from app.calibration.measures.auc import roc_auc_checked
from app.calibration.measures.block_resampled import BlockResampler
from app.calibration.measures.block_sums import BlockTables
from app.calibration.measures.bootstrap import RESAMPLES, check_resamples
from app.calibration.measures.diagnostics import headline, outcome_floats, report_and_view
from app.calibration.measures.report_bootstrap import VIEWS_AT_ONCE, Resampled, SharedResamples
from app.calibration.measures.resampled import View

THREADED_ROWS = 100_000
"""Rows from which the sets are prepared in threads (two), whose sorts and sums release the
GIL; below, joblib-free and in line, a thread's start costs more than it gives."""

HEADLINE_EDGES = np.linspace(0.0, 1.0, 11)[1:-1]
"""The headline ECE's bins: 10 of equal width."""

T = TypeVar("T")


@dataclass(frozen=True)
class _Prepared:
    """A set's headline metrics, its view (None without resamples) and, from the blocks'
    sums, its sampler (made in its thread; a sampler of rows is made by ``results``)."""

    point: dict[str, Any]
    view: View | None = None
    sampler: BlockResampler | None = None


class HeadlineReports:
    """The :func:`~app.calibration.measures.diagnostics.headline` metrics of several sets of
    probabilities for one labelled batch, with intervals from one set of resamples shared by
    all (:class:`~app.calibration.measures.report_bootstrap.SharedResamples`: paired, the
    difference of two sets' values on a resample is the difference on that resample).

    Each set is prepared as soon as the caller has it (:meth:`add`), in threads from
    :data:`THREADED_ROWS` rows. Used as a context manager, which waits for its threads however
    it is left; :meth:`results` gives the metrics and intervals in the order of :meth:`add`.

    From :data:`~app.calibration.measures.report_bootstrap.LARGE_ROWS` rows a binary set's log
    loss, Brier score and ECE are read off the block sums its bootstrap takes anyway, one pass
    over the rows instead of two; they equal the rows' measures to 1e-12 relative (the sums
    are taken in another order), its AUC is the exact one, from its own sort.
    """

    def __init__(
        self, labels: NDArray[np.int64], weights: FloatArray | None, resamples: int = RESAMPLES
    ) -> None:
        check_resamples(resamples)
        self.labels, self.weights = labels, weights
        self.shared = SharedResamples(labels.size, resamples) if resamples else None
        self._outcome: FloatArray | None = None
        self._pool = ThreadPoolExecutor(2) if labels.size >= THREADED_ROWS else None
        self._prepared: list[Callable[[], _Prepared]] = []

    def __enter__(self) -> HeadlineReports:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def add(
        self,
        probabilities: FloatArray,
        runs: NDArray[np.intp] | None = None,
        *,
        background: bool = False,
    ) -> None:
        """Prepare one more set (``runs``: rows in which it comes in sorted runs, the AUC's
        hint, :func:`~app.calibration.kernels.crossval.fold_runs`). A large binary set is
        checked here (a :class:`~app.calibration.base.CalibrationError` now), and its block
        sums and its AUC's sort then run side by side, unless in the ``background`` of work
        the caller goes on with (a fit), where they take one thread: beside a third, they
        slowed an isotonic fit of 10^6 rows by 0.1 s (measured). Any other set's error comes
        from :meth:`results`."""
        labels, weights, shared = self.labels, self.weights, self.shared
        if probabilities.ndim == 1 and self._outcome is None:
            self._outcome = outcome_floats([probabilities], labels)
        if shared is None or shared.blocks is None or probabilities.ndim != 1:
            whole = self._run(self._prepare, probabilities, self._outcome)
            self._prepared.append(whole.result)
            return
        view = report_and_view(probabilities, labels, weights, None, self._outcome)[1]
        if background:
            both = self._run(self._from_view, view, runs)
            self._prepared.append(both.result)
            return
        tables = self._run(shared.tables, view, HEADLINE_EDGES, None)
        auc = self._run(roc_auc_checked, view.p, view.y != 0.0, view.w, runs)
        self._prepared.append(lambda: self._from_tables(tables.result(), auc.result(), view))

    def results(self) -> tuple[list[dict[str, Any]], list[Resampled]]:
        """Every set's metrics and resamples, in the order of :meth:`add` (the first error of
        any set's preparation raised here). Samplers of rows are made and resampled
        :data:`~app.calibration.measures.report_bootstrap.VIEWS_AT_ONCE` at a time: a
        comparison of 50 versions holds two views' matrices, not fifty."""
        prepared = [result() for result in self._prepared]
        points = [each.point for each in prepared]
        shared = self.shared
        if shared is None:
            return points, [Resampled({}, {}) for _ in prepared]
        out: list[Resampled] = []
        for first in range(0, len(prepared), VIEWS_AT_ONCE):  # a loop over groups of views
            group = prepared[first : first + VIEWS_AT_ONCE]
            views = [each.view for each in group if each.view is not None]
            samplers = [
                each.sampler or shared.sampler(view, HEADLINE_EDGES, each.point)
                for each, view in zip(group, views, strict=True)
            ]
            out += shared.resampled(samplers, views, [each.point for each in group])
        return points, out

    def _run(self, function: Callable[..., T], *args: Any) -> Future[T]:
        """``function(*args)`` in the pool's threads, in the job's context (its budget), or
        here and now below :data:`THREADED_ROWS` rows."""
        task = in_context(function)
        if self._pool is not None:
            return self._pool.submit(task, *args)
        done: Future[T] = Future()
        try:
            done.set_result(task(*args))
        except Exception as exc:  # raised by results(), as a thread's would be
            done.set_exception(exc)
        return done

    def _prepare(self, probabilities: FloatArray, outcome: FloatArray | None) -> _Prepared:
        """A set's metrics from its rows, and its view (but a large binary set's: :meth:`add`)."""
        point = headline(probabilities, self.labels, self.weights)
        if self.shared is None:
            return _Prepared(point)
        view = report_and_view(probabilities, self.labels, self.weights, None, outcome)[1]
        if self.shared.blocks is None:
            return _Prepared(point, view)  # its sampler of rows: made by results()
        return _Prepared(
            point,
            view,
            self.shared.block_sampler(self.shared.tables(view, HEADLINE_EDGES, point), view, point),
        )

    def _from_view(self, view: View, runs: NDArray[np.intp] | None) -> _Prepared:
        """:meth:`_from_tables` of a view: its block sums, then its AUC."""
        assert self.shared is not None
        tables = self.shared.tables(view, HEADLINE_EDGES, None)
        auc = roc_auc_checked(view.p, view.y != 0.0, view.w, runs)
        return self._from_tables(tables, auc, view)

    def _from_tables(self, tables: BlockTables, auc: float | None, view: View) -> _Prepared:
        """A large binary set's headline metrics read off its block sums (each term's sum
        over the weight's, and the bins' sums of w (p - y)), its exact AUC beside them, and
        its sampler of blocks."""
        assert self.shared is not None
        weight = tables.sums[:, tables.columns["weight"]].sum()

        def mean(name: str) -> float:
            return float(tables.sums[:, tables.columns[name]].sum() / weight)

        point: dict[str, Any] = {
            "brier": mean("brier"),
            "log_loss": mean("log_loss"),
            "ece": float(np.abs(tables.gaps.sum(axis=0)).sum() / weight),
            "auc": auc,
        }
        tables = replace(tables, auc=np.nan if auc is None else auc)
        return _Prepared(point, view, self.shared.block_sampler(tables, view, point))


def headline_resampled(
    probability_sets: Sequence[FloatArray],
    labels: NDArray[np.int64],
    weights: FloatArray | None,
    resamples: int = RESAMPLES,
) -> tuple[list[dict[str, Any]], list[Resampled]]:
    """The headline metrics of several sets of probabilities for one labelled batch, and their
    intervals and values on one set of shared resamples (:class:`HeadlineReports`, every set
    known at once)."""
    with HeadlineReports(labels, weights, resamples) as reports:
        for probabilities in probability_sets:
            reports.add(probabilities)
        return reports.results()
