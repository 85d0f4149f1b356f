"""Live calibration of a calibrator's logged traffic, window by window and version by version.

For each time window (``1h``, ``1d`` or ``7d``) and each version that answered in it:

- traffic: ``n_predictions`` logged, ``n_labelled`` with an outcome;
- calibration on the labelled ones (:func:`app.calibration.metrics.summarize`): the mean
  predicted probability against the observed rate, log loss, Brier score and the binned ECE;
- a shift of the raw scores against the version's fitting batch that needs no labels: the
  population stability index over the batch's deciles (:func:`psi`) and the two-sample
  Kolmogorov-Smirnov statistic (:func:`ks_statistic`).

A window without traffic is one row of zeros and nulls, as an empty reliability bin is.
A k-class version's window has the multiclass log loss and Brier score, the top-label ECE,
and its mean top-label confidence against its accuracy (:func:`_class_metrics`); no PSI or
KS, its raw scores being rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from app.calibration.metrics import summarize
from app.calibration.multiclass_metrics import summarize_multiclass
from app.errors import invalid
from app.store.traffic_reads import ClassRows

FloatArray = NDArray[np.float64]
Window = Literal["1h", "1d", "7d"]
WINDOW_SECONDS: dict[str, int] = {"1h": 3600, "1d": 86_400, "7d": 7 * 86_400}
MAX_WINDOWS = 1000
"""The most windows one request may span."""

EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9000, 1, 1, tzinfo=UTC)
"""The times a range of traffic may name: it is timed from the epoch, and a range must end
far enough from year 9999 to be drawn."""


def window_start(moment: datetime, window: Window) -> datetime:
    """The start of the window of width ``window`` that holds ``moment``: windows are
    aligned on the epoch, so every replica and request cuts time alike."""
    width = WINDOW_SECONDS[window]
    return datetime.fromtimestamp(moment.timestamp() // width * width, UTC)


def in_utc(moment: datetime, loc: tuple[str | int, ...]) -> datetime:
    """``moment`` in UTC (a time without a zone is read as UTC), or a 422 at ``loc`` when it
    lies outside [:data:`EARLIEST`, :data:`LATEST`]."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    if not EARLIEST <= moment <= LATEST:  # compared without conversion: that could overflow
        raise invalid(loc, f"must lie in [{EARLIEST:%Y-%m-%d}, {LATEST:%Y-%m-%d}]")
    return moment.astimezone(UTC)


PSI_BINS = 10
PSI_FLOOR = 1e-4
"""Bin shares are floored at this before the logarithm (an empty bin would be infinite)."""


@dataclass(frozen=True)
class Traffic:
    """Logged predictions in time order: seconds since the epoch, the version that answered,
    the raw score and the probability (NaN for k-class rows), the label (-1: none yet)."""

    seconds: FloatArray
    versions: NDArray[np.int64]
    scores: FloatArray
    probabilities: FloatArray
    labels: NDArray[np.int64]


def psi(reference: FloatArray, actual: FloatArray, bins: int = PSI_BINS) -> float | None:
    """The population stability index of ``actual`` against ``reference``:
    sum over the reference's quantile bins of (a - e) * ln(a / e), with the shares a (actual)
    and e (reference) floored at :data:`PSI_FLOOR`. None when either side is empty."""
    if reference.size == 0 or actual.size == 0:
        return None
    inner = np.unique(np.quantile(reference, np.linspace(0, 1, bins + 1)[1:-1]))
    expected = np.bincount(
        np.searchsorted(inner, reference, side="right"), minlength=inner.size + 1
    )
    observed = np.bincount(np.searchsorted(inner, actual, side="right"), minlength=inner.size + 1)
    e = np.maximum(expected / reference.size, PSI_FLOOR)
    a = np.maximum(observed / actual.size, PSI_FLOOR)
    return float(np.sum((a - e) * np.log(a / e)))


def ks_statistic(reference: FloatArray, actual: FloatArray) -> float | None:
    """The two-sample Kolmogorov-Smirnov statistic, sup |F_reference - F_actual| over every
    value either sample takes. None when either side is empty."""
    if reference.size == 0 or actual.size == 0:
        return None
    ref, act = np.sort(reference), np.sort(actual)
    points = np.concatenate([ref, act])
    gap = np.searchsorted(ref, points, side="right") / ref.size
    gap -= np.searchsorted(act, points, side="right") / act.size
    return float(np.max(np.abs(gap)))


def windows(
    traffic: Traffic,
    since: datetime,
    until: datetime,
    window: Window,
    reference: Callable[[int], FloatArray],
    *,
    version: int | None = None,
    n_bins: int = 10,
    class_rows: Mapping[int, ClassRows] | None = None,
) -> list[dict[str, Any]]:
    """One row per window of [since, until) and version that answered in it (or the one
    ``version``), oldest first; ``reference(v)`` gives version v's fitting scores, and
    ``class_rows`` the k-class versions' probabilities (:func:`_class_metrics`)."""
    width = WINDOW_SECONDS[window]
    start = since.timestamp()
    count = math.ceil((until.timestamp() - start) / width)
    index = np.floor((traffic.seconds - start) / width).astype(np.int64)
    rows: list[dict[str, Any]] = []
    for w in range(count):
        in_window = index == w
        present = np.unique(traffic.versions[in_window]).tolist()
        wanted = [version] if version is not None else present or [None]
        for v in wanted:
            mask = in_window if v is None else in_window & (traffic.versions == v)
            begin = since + timedelta(seconds=w * width)
            end = min(begin + timedelta(seconds=width), until)
            row = _row(traffic, mask, begin, end, v, reference, n_bins)
            if v is not None and class_rows and v in class_rows:
                row.update(_class_metrics(class_rows[v], begin, end, n_bins))
            rows.append(row)
    return rows


def _class_metrics(
    rows: ClassRows, start: datetime, end: datetime, n_bins: int
) -> dict[str, float | None]:
    """A k-class version's calibration in [start, end) on its labelled predictions
    (:func:`~app.calibration.multiclass_metrics.summarize_multiclass`): the multiclass log loss
    and Brier score, the top-label ECE, and the mean top-label confidence (``mean_predicted``)
    against the accuracy (``observed_rate``), the top-label reading of predicted against
    observed. Nothing when none is labelled."""
    k = rows.probabilities.shape[1]
    within = (rows.seconds >= start.timestamp()) & (rows.seconds < end.timestamp())
    labelled = within & (rows.labels >= 0) & (rows.labels < k)
    if not labelled.any():
        return {}
    P, y = rows.probabilities[labelled], rows.labels[labelled]
    metrics = summarize_multiclass(P, y, n_bins=n_bins)["metrics"]
    return {
        "mean_predicted": float(P.max(axis=1).mean()),
        "observed_rate": float((P.argmax(axis=1) == y).mean()),
        "log_loss": metrics["log_loss"],
        "brier": metrics["brier"],
        "ece": metrics["ece"],
    }


def _row(
    traffic: Traffic,
    mask: NDArray[np.bool_],
    start: datetime,
    end: datetime,
    version: int | None,
    reference: Callable[[int], FloatArray],
    n_bins: int,
) -> dict[str, Any]:
    binary = mask & np.isfinite(traffic.probabilities)  # k-class rows: traffic, no metrics
    labelled = binary & (traffic.labels >= 0) & (traffic.labels <= 1)
    row: dict[str, Any] = {
        "start": start,
        "end": end,
        "version": version,
        "n_predictions": int(mask.sum()),
        "n_labelled": int((mask & (traffic.labels >= 0)).sum()),  # k-class rows too
        "mean_predicted": None,
        "observed_rate": None,
        "log_loss": None,
        "brier": None,
        "ece": None,
        "psi": None,
        "ks": None,
    }
    if labelled.any():
        p = traffic.probabilities[labelled]
        y = traffic.labels[labelled].astype(np.float64)
        metrics = summarize(p, y, n_bins=n_bins)["metrics"]
        row.update(
            mean_predicted=float(p.mean()),
            observed_rate=float(y.mean()),
            log_loss=metrics["log_loss"],
            brier=metrics["brier"],
            ece=metrics["ece"],
        )
    if version is not None and binary.any():  # a k-class batch's scores are a matrix
        fitted = reference(version)
        scores = traffic.scores[binary]
        row.update(psi=psi(fitted, scores), ks=ks_statistic(fitted, scores))
    return row
