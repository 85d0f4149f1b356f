"""Compare stored versions on a fresh labelled batch: which one should ``production`` be?

Every selected version predicts the same batch; each gets the headline metrics (Brier score,
log loss, ECE and AUC, or accuracy for multiclass) and its difference from the best version
on each metric. Nothing is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.batch import Batch, invalid
from app.calibration.diagnostics import headline, raw_as_probabilities
from app.errors import InvalidInput
from app.resolver import Selector
from app.service import CalibrationService

MAX_COMPARED = 50
HIGHER_IS_BETTER = frozenset({"auc", "accuracy"})


def compare_versions(
    service: CalibrationService,
    name: str,
    batch: Batch,
    selectors: Sequence[Selector] | None,
    *,
    by: str = "log_loss",
) -> dict[str, Any]:
    """Rank the selected versions (default: every version, newest first, at most 50)."""
    if selectors is None:
        view = service.get_calibrator(name, MAX_COMPARED, 0)
        selectors = [record.version for record in view.versions]
    if len(selectors) > MAX_COMPARED:
        raise invalid(("body", "versions"), f"lists {len(selectors)}; at most {MAX_COMPARED}")
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for i, selector in enumerate(selectors):
        loaded = service.resolve(name, selector)
        if loaded.version in seen:
            continue
        seen.add(loaded.version)
        try:
            loaded.check_shape(batch.scores)
        except InvalidInput as exc:
            raise invalid(("body", "versions", i), f"(v{loaded.version}): {exc.detail}") from None
        probabilities = loaded.predict(batch.scores)
        rows.append(
            {
                "version": loaded.version,
                "method": loaded.method,
                "metrics": headline(probabilities, batch.labels, batch.weights),
            }
        )
    raw = headline(raw_as_probabilities(batch.scores), batch.labels, batch.weights)
    if rows and by not in rows[0]["metrics"]:
        known = ", ".join(sorted(rows[0]["metrics"]))
        raise invalid(("query", "by"), f"is {by!r}; expected one of {known}")
    _rank(rows, by)
    return {"name": name, "n_samples": batch.n_samples, "by": by, "versions": rows, "raw": raw}


def _rank(rows: list[dict[str, Any]], by: str) -> None:
    """Sort best first by ``by`` (ties: newer first) and add each metric's gap to the best."""

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
