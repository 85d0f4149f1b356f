"""Rank stored versions on a fresh labelled batch: which one should ``production`` be?

Every selected version predicts the same batch (:meth:`app.diagnosis.Diagnosis.compare`);
each gets the headline metrics (Brier score, log loss, ECE and AUC, or accuracy for
multiclass) and here its difference from the best version on each metric.
"""

from __future__ import annotations

from typing import Any

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
