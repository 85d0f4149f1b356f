"""The monitoring rows as CSV (``GET …/monitoring.csv``): one line per window and version, the
JSON's numbers flattened into columns, for a spreadsheet or a notebook.

The nested objects become columns of their own: ``estimated_accuracy`` and its band
``estimated_accuracy_low``/``_high``, ``realized_accuracy``, ``prior_training``,
``prior_estimated``, ``prior_low``, ``prior_high``, and so on for every measure. A k-class
version's priors are vectors: their entries are joined with ``;`` in one cell. An empty cell
is a null. Numbers are written as Python's ``repr`` writes floats, which reads back to the
same double.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.calibration import BINARY_KEYS

PLAIN = (
    "start",
    "end",
    "version",
    "n_predictions",
    "n_labelled",
    "mean_predicted",
    "observed_rate",
    "log_loss",
    "brier",
    "ece",
    "psi",
    "ks",
)
MEASURES = BINARY_KEYS
"""The measures of ``estimated`` and ``realized`` (k classes have three of them)."""
COLUMNS = (
    *PLAIN,
    *(
        column
        for measure in MEASURES
        for column in (
            f"estimated_{measure}",
            f"estimated_{measure}_low",
            f"estimated_{measure}_high",
            f"realized_{measure}",
        )
    ),
    "prior_training",
    "prior_estimated",
    "prior_low",
    "prior_high",
)
"""The CSV's header, in order."""


def monitoring_csv(rows: Sequence[dict[str, Any]]) -> str:
    """The rows of :meth:`app.service.traffic.cases.TrafficCases.monitoring` as CSV text."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_cell(value) for value in _flat(row)])
    return out.getvalue()


def _flat(row: dict[str, Any]) -> list[Any]:
    """The row's values in the order of :data:`COLUMNS`."""
    values = [row.get(column) for column in PLAIN]
    estimated, realized = row.get("estimated") or {}, row.get("realized") or {}
    bands = estimated.get("intervals") or {}
    for measure in MEASURES:
        low, high = bands.get(measure) or (None, None)
        values += [estimated.get(measure), low, high, realized.get(measure)]
    prior = row.get("prior") or {}
    interval = prior.get("interval")
    if interval is None:
        low = high = None
    elif interval and isinstance(interval[0], list | tuple):  # k classes: a band per class
        low, high = [band[0] for band in interval], [band[1] for band in interval]
    else:
        low, high = interval
    return [*values, prior.get("training"), prior.get("estimated"), low, high]


def _cell(value: Any) -> str:
    """A value as its cell: empty for None, ISO 8601 (Z) for a time, ``;``-joined for a
    vector, ``repr`` for a float."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, list | tuple):
        return ";".join(_cell(item) for item in value)
    if isinstance(value, float):
        return repr(value)
    return str(value)
