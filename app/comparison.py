"""Rank stored versions on a fresh labelled batch: which one should ``production`` be?

Every selected version predicts the same batch (:meth:`app.diagnosis.Diagnosis.compare`);
each gets the headline metrics (Brier score, log loss, ECE and AUC, or accuracy for
multiclass) and here its difference from the best version on each metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration.bootstrap import percentile_interval
from app.errors import invalid

MAX_COMPARED = 50
COMPARABLE = ("log_loss", "brier", "ece", "auc", "accuracy")
"""Every metric a compare may rank by (``auc`` for binary, ``accuracy`` for multiclass)."""
HIGHER_IS_BETTER = frozenset({"auc", "accuracy"})


def rank(rows: list[dict[str, Any]], by: str) -> None:
    """Sort best first by ``by`` (ties: newer first) and add each metric's gap to the best;
    422 at ``query.by`` when the rows have no such metric."""
    if rows and by not in rows[0]["metrics"]:
        known = ", ".join(sorted(rows[0]["metrics"]))
        raise invalid(("query", "by"), f"is {by!r}; expected one of {known}")

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
