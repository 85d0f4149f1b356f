"""Rank stored versions on a fresh labelled batch: which one should ``production`` be?

Every selected version predicts the same batch (:meth:`Comparison.compare`); each gets the
headline metrics (Brier score, log loss, ECE and AUC, or accuracy for
multiclass) and here its difference from the best version on each metric.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app import figures
from app.calibration import (
    RESAMPLES,
    CalibrationError,
    Resampled,
    headline_resampled,
    percentile_interval,
    raw_as_probabilities,
    reliability_reports,
    with_intervals,
)
from app.errors import InvalidInput, invalid
from app.service.batches import Batch
from app.service.reporting import DEFAULT_BINS, Curve, ImageFormat
from app.service.version_cache import VersionCache
from app.store import Database, Selector

MAX_COMPARED = 50
COMPARABLE = ("log_loss", "brier", "ece", "auc", "accuracy")
"""Every metric a compare may rank by (``auc`` for binary, ``accuracy`` for multiclass)."""
HIGHER_IS_BETTER = frozenset({"auc", "accuracy"})


def rank(rows: list[dict[str, Any]], by: str) -> None:
    """Sort best first by ``by`` (ties: newer first) and add each metric's gap to the best;
    422 at ``query.by`` when the rows have no such metric."""
    if rows and by not in rows[0]["metrics"]:
        known = ", ".join(sorted(rows[0]["metrics"]))
        raise invalid(("by",), f"is {by!r}; expected one of {known}")

    def value(row: dict[str, Any], metric: str) -> float:
        v = row["metrics"].get(metric)
        worst = float("-inf") if metric in HIGHER_IS_BETTER else float("inf")
        return worst if v is None else float(v)

    sign = -1.0 if by in HIGHER_IS_BETTER else 1.0
    rows.sort(key=lambda row: (sign * value(row, by), -row["version"]))
    for metric in rows[0]["metrics"] if rows else ():
        values = [value(row, metric) for row in rows]
        best = max(values) if metric in HIGHER_IS_BETTER else min(values)
        for row, v in zip(rows, values, strict=True):
            finite = abs(v) != float("inf") and abs(best) != float("inf")
            row.setdefault("delta", {})[metric] = v - best if finite else None


def paired_differences(
    rows: list[dict[str, Any]],
    by: str,
    resampled: Mapping[int, NDArray[np.float64]],
    n_samples: int,
) -> None:
    """Add to each ranked row (best first) its difference from the best in ``by``, with the
    paired bootstrap 95% interval of that difference (the same resamples for every version:
    ``resampled`` holds each version's ``by`` on each), and whether it is significant: the
    interval excludes 0, on a batch of two rows at least (one row's resamples are copies of
    it, which cannot show noise). The best row differs from itself by 0, never
    significantly."""
    if not rows:
        return
    best = resampled.get(rows[0]["version"])
    for row in rows:
        value = row["delta"].get(by)
        mine = resampled.get(row["version"])
        interval = None
        if best is not None and mine is not None and row is not rows[0]:
            interval = percentile_interval(mine - best)
        elif row is rows[0] and value is not None:
            interval = (0.0, 0.0)
        row["difference"] = {
            "value": value,
            "interval": None if interval is None else list(interval),
        }
        row["significant"] = (
            n_samples >= 2 and interval is not None and (interval[0] > 0.0 or interval[1] < 0.0)
        )


def ranked(
    name: str,
    rows: list[dict[str, Any]],
    probability_sets: Sequence[NDArray[np.float64]],
    batch: Batch,
    by: str,
    resamples: int,
) -> dict[str, Any]:
    """The compare document of ``rows`` (each a version's number and method) whose
    probabilities on ``batch`` are ``probability_sets``: their metrics with intervals, best
    first by ``by``, each with its paired bootstrap difference from the best (``resamples``
    shared by all), and the batch's raw scores scored alike. How the probabilities were made
    is the caller's: the compare route's versions predict the batch
    (:meth:`Comparison.compare`), the web view's verdict scores each version out of sample
    (:mod:`app.service.verdicts`)."""
    try:
        points, resampled = headline_resampled(
            [*probability_sets, raw_as_probabilities(batch.scores)],
            batch.labels,
            batch.weights,
            resamples,
        )
    except CalibrationError as exc:
        raise invalid(exc.loc, exc.reason) from None
    by_version: dict[int, Resampled] = {}
    for row, metrics, found in zip(rows, points[:-1], resampled[:-1], strict=True):
        row["metrics"] = metrics
        by_version[row["version"]] = found
    rank(rows, by)
    values = {v: found.values[by] for v, found in by_version.items() if by in found.values}
    paired_differences(rows, by, values, batch.n_samples)
    for row in rows:
        row["metrics"] = with_intervals(row["metrics"], by_version[row["version"]])
    raw = with_intervals(points[-1], resampled[-1])
    return {
        "name": name,
        "n_samples": batch.n_samples,
        "by": by,
        "bootstrap": resamples,
        "versions": rows,
        "raw": raw,
    }


class Comparison:
    """The compare route's use case: stored versions ranked on one labelled batch."""

    def __init__(self, database: Database, versions: VersionCache) -> None:
        self.database = database
        self.versions = versions

    def compare(
        self,
        name: str,
        batch: Batch,
        selectors: Sequence[Selector] | None,
        *,
        by: str,
        resamples: int = RESAMPLES,
    ) -> dict[str, Any]:
        """Rank the selected versions (default: every version, newest first, at most 50) on
        one labelled batch, each with its difference from the best and that difference's
        paired bootstrap interval (``resamples`` shared by all versions). The versions (and
        their artifacts) are read in one snapshot."""
        rows, probability_sets = self._compared(name, batch, selectors, by)
        return ranked(name, rows, probability_sets, batch, by, resamples)

    def compare_picture(
        self,
        name: str,
        batch: Batch,
        selectors: Sequence[Selector] | None,
        *,
        by: str,
        image_format: ImageFormat,
        curve: Curve = "binned",
        resamples: int = RESAMPLES,
    ) -> bytes:
        """The compared versions' reliability curves on the batch, overlaid, best (by ``by``)
        first, as ``curve`` asks: 10 uniform bins with their Wilson intervals, the smooth
        curves with their bands from ``resamples`` shared resamples, or both."""
        rows, probability_sets = self._compared(name, batch, selectors, by)
        try:
            reports = reliability_reports(
                probability_sets,
                batch.labels,
                batch.weights,
                n_bins=DEFAULT_BINS,
                strategy="uniform",
                resamples=0 if curve == "binned" else resamples,
            )
        except CalibrationError as exc:
            raise invalid(exc.loc, exc.reason) from None
        for row, report in zip(rows, reports, strict=True):
            row["metrics"] = report.metrics
            row["report"] = report
        rank(rows, by)
        named = [
            (
                f"v{row['version']} {row['method']}  {by} {_figure(row['metrics'].get(by))}",
                row["report"],
            )
            for row in rows
        ]
        title = f"{name} · {len(rows)} versions on n = {batch.n_samples}"
        return figures.render_comparison_diagram(
            named, title=title, image_format=image_format, curve=curve
        )

    def _compared(
        self, name: str, batch: Batch, selectors: Sequence[Selector] | None, by: str
    ) -> tuple[list[dict[str, Any]], list[NDArray[np.float64]]]:
        """The selected versions (each once, in the given order) and their probabilities on
        the batch, read in one snapshot."""
        if by not in COMPARABLE:
            raise invalid(("by",), f"is {by!r}; expected one of {', '.join(COMPARABLE)}")
        generation = self.versions.generation(name)
        with self.database.transaction() as repo:
            if selectors is None:
                _, records, _ = repo.get_calibrator(name, MAX_COMPARED, 0)
            else:
                records = [repo.get_version(name, selector) for selector in selectors]
            versions = {r.version: self.versions.load(r, repo, generation) for r in records}
        rows: list[dict[str, Any]] = []
        probability_sets: list[NDArray[np.float64]] = []
        seen: set[int] = set()
        for i, record in enumerate(records):
            if record.version in seen:
                continue
            seen.add(record.version)
            loaded = versions[record.version]
            try:
                probabilities = loaded.checked_predict(batch.scores)
            except InvalidInput as exc:
                where = ("versions", i) if selectors is not None else ("scores",)
                raise invalid(where, f"(v{loaded.version}): {exc.detail}") from None
            rows.append({"version": loaded.version, "method": loaded.method})
            probability_sets.append(probabilities)
        return rows, probability_sets


def _figure(value: object) -> str:
    return f"{value:.4f}" if isinstance(value, float) else "n/a"
