"""A monitoring window's row: its counts and the figures of its sums, as JSON's fields
(:meth:`app.service.traffic.monitoring.Monitor.rows`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from app.service.traffic.expectations import WindowExpectations
from app.service.traffic.sums import CalibrationSums


def window_row(
    counts: tuple[int, int],
    calibration_sums: CalibrationSums | None,
    expectations: WindowExpectations | None,
    shift: dict[str, float] | None,
    start: datetime,
    end: datetime,
    version: int | None,
    resamples: int,
) -> dict[str, Any]:
    """The row of the window [start, end) of ``version`` (None: a window without traffic):
    its (predictions, labelled) ``counts``, its calibration figures with their intervals
    (``resamples`` draws), its ``shift`` (PSI and KS), and its expectations."""
    row: dict[str, Any] = {
        "start": start,
        "end": end,
        "version": version,
        "n_predictions": counts[0],
        "n_labelled": counts[1],
        "mean_predicted": None,
        "observed_rate": None,
        "log_loss": None,
        "brier": None,
        "ece": None,
        "psi": None,
        "ks": None,
    }
    calibration = None if calibration_sums is None else calibration_sums.result()
    if calibration_sums is not None and calibration is not None:
        row.update(calibration)
        intervals = calibration_sums.intervals(resamples)
        if intervals:
            row["intervals"] = {k: list(v) for k, v in intervals.items()}
    row.update(shift or {})
    row["estimated"] = None if expectations is None else expectations.estimated
    row["realized"] = None if expectations is None else expectations.realized(calibration)
    row["prior"] = None if expectations is None else expectations.prior
    return row
