"""A version's stored metrics (:mod:`app.calibration.measures.headline_reports`) against what
they replaced: :func:`headline` over the rows and :func:`bootstrap` of the views, scikit-learn
for the means; and the threads they are prepared in (errors, the job's budget, shutdown)."""

from __future__ import annotations

import contextvars
import threading

import numpy as np
import pytest
from scipy.special import expit, logit
from sklearn.metrics import brier_score_loss, log_loss

from app.calibration.base import CalibrationError
from app.calibration.kernels import budget
from app.calibration.measures import block_sums, report_bootstrap
from app.calibration.measures.bootstrap import RESAMPLES
from app.calibration.measures.diagnostics import headline, raw_as_probabilities, report_and_view
from app.calibration.measures.headline_reports import (
    HEADLINE_EDGES,
    HeadlineReports,
    headline_resampled,
)


def _binary(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 3.0, n)
    y = (rng.random(n) < expit(1.3 * logit(p) + 0.2)).astype(np.int64)
    return p, y


def _replaced(sets: list[np.ndarray], y: np.ndarray) -> tuple[list[dict], list]:
    """What the stored metrics were before: headline() of each set's rows, then bootstrap()."""
    points = [headline(p, y, None) for p in sets]
    views = [report_and_view(p, y, None, None)[1] for p in sets]
    edges = [HEADLINE_EDGES] * len(sets)
    return points, report_bootstrap.bootstrap(views, edges, points, RESAMPLES)


@pytest.mark.parametrize("weighted", [False, True])
def test_metrics_read_off_the_block_sums_are_the_measures_of_the_rows(weighted: bool) -> None:
    """From LARGE_ROWS rows a binary set's log loss, Brier score and ECE come from the sums
    its bootstrap takes per block: they equal :func:`headline`'s, which reads the rows, and
    scikit-learn's log loss and Brier score, p on the bins' edges, at 0 and at 1 included."""
    rng = np.random.default_rng(21)
    p, y = _binary(report_bootstrap.LARGE_ROWS + 5_000, 21)
    on_edges = rng.choice(p.size, 3_000, replace=False)
    p[on_edges] = rng.choice(np.r_[0.0, HEADLINE_EDGES, 1.0], on_edges.size)
    w = rng.uniform(0.1, 3.0, p.size) if weighted else None
    (point,), (resampled,) = headline_resampled([p], y, w)
    expected = headline(p, y, w)
    assert list(point) == list(expected)
    for name in ("log_loss", "brier", "ece"):
        assert point[name] == pytest.approx(expected[name], rel=1e-12), name
    assert point["auc"] == expected["auc"]
    clipped = np.clip(p, 1e-15, 1 - 1e-15)  # ours clips at 1e-15, scikit-learn at float's eps
    assert point["log_loss"] == pytest.approx(log_loss(y, clipped, sample_weight=w), rel=1e-9)
    assert point["brier"] == pytest.approx(brier_score_loss(y, p, sample_weight=w), rel=1e-12)
    for name, (low, high) in resampled.intervals.items():
        if name != "ece":  # the ECE's resamples are biased upwards: its point may lie below
            assert low <= point[name] <= high, name


@pytest.mark.parametrize(("n", "sets"), [(120_000, 2), (5_000, 2), (5_000, 5)])
def test_sets_added_as_they_come_get_what_the_replaced_code_gave(n: int, sets: int) -> None:
    """As a fit adds them (the raw scores in the background, in one thread; the calibrated
    probabilities later, in two), blocks or rows, two sets or a comparison's five: the same
    metrics and intervals as headline() and bootstrap() gave, to the sums' last bits."""
    p, y = _binary(n, 13)
    rng = np.random.default_rng(1)
    raw = raw_as_probabilities(logit(np.clip(p, 1e-6, 1 - 1e-6)) * 2.0)
    others = [np.clip(p + rng.normal(0, 0.02 * k, n), 0, 1) for k in range(sets - 1)]
    expected_points, expected = _replaced([raw, *others], y)
    with HeadlineReports(y, None) as reports:
        reports.add(raw, background=True)
        for other in others:
            reports.add(other)
        points, found = reports.results()
    for ours, theirs in zip(points, expected_points, strict=True):
        assert ours.keys() == theirs.keys()
        for name in ours:
            assert ours[name] == pytest.approx(theirs[name], rel=1e-12), name
    for ours_resampled, theirs_resampled in zip(found, expected, strict=True):
        assert ours_resampled.intervals.keys() == theirs_resampled.intervals.keys()
        for name, interval in ours_resampled.intervals.items():
            assert interval == pytest.approx(theirs_resampled.intervals[name], rel=1e-9), name


def test_an_error_comes_out_and_no_thread_is_left_behind() -> None:
    """A large binary set that is not probabilities is refused as it is added, a matrix's
    error comes from results(), and however the ``with`` is left its threads have ended."""
    p, y = _binary(120_000, 14)
    before = threading.active_count()
    with HeadlineReports(y, None) as reports:
        reports.add(p, background=True)
        with pytest.raises(CalibrationError, match="probabilit"):
            reports.add(np.full(p.size, 2.0))
    assert threading.active_count() == before
    matrix = np.column_stack([1 - p, p])
    matrix[7] = -matrix[7]
    with HeadlineReports(y, None) as reports:
        reports.add(matrix)
        with pytest.raises(CalibrationError):
            reports.results()

    def a_fit_that_fails() -> None:
        with HeadlineReports(y, None) as reports:
            reports.add(p, background=True)
            raise RuntimeError("the fit failed")  # the caller's own error, raised meanwhile

    with pytest.raises(RuntimeError, match="the fit failed"):
        a_fit_that_fails()
    assert threading.active_count() == before


def test_the_threads_work_under_the_jobs_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sets' threads check the job's budget between chunks of rows: a cancelled job stops
    there (Abandoned), not after its report (whose resamples' checkpoints are off here)."""
    monkeypatch.setattr(block_sums, "ROW_CHUNK", 10_000)
    monkeypatch.setattr(report_bootstrap, "checkpoint", lambda: None)
    p, y = _binary(120_000, 15)
    job = budget.Budget(60.0)
    job.cancelled.set()

    def in_a_job() -> None:
        budget.enter(job)
        with HeadlineReports(y, None) as reports:
            reports.add(p, background=True)
            reports.add(p)
            reports.results()

    with pytest.raises(budget.Abandoned, match="cancelled"):
        contextvars.copy_context().run(in_a_job)
