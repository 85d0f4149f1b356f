"""Live calibration of a calibrator's logged traffic, window by window and version by version.

For each time window (``1h``, ``1d`` or ``7d``) and each version that answered in it:

- traffic: ``n_predictions`` logged, ``n_labelled`` with an outcome;
- calibration on the labelled ones: the mean predicted probability against the observed
  rate, log loss, Brier score and the binned ECE, as
  :func:`app.calibration.metrics.summarize` defines them;
- a shift of the raw scores against the version's fitting batch that needs no labels: the
  population stability index over the batch's deciles and the two-sample
  Kolmogorov-Smirnov statistic (:class:`Reference`).

A window without traffic is one row of zeros and nulls, as an empty reliability bin is.
A k-class version's window has the multiclass log loss and Brier score, the top-label ECE,
and its mean top-label confidence against its accuracy (:meth:`Monitor.add_class_rows`); no
PSI or KS, its raw scores being rows.

The traffic of a range can be far larger than memory (an hour at 10^4 predictions a second
is 3.6 x 10^7 rows), so :class:`Monitor` reads it a chunk at a time and keeps sums: each
number is a sum over rows divided by a count, or (KS) a sup over counts that add up.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from app.calibration.metrics import log_losses
from app.calibration.multiclass_metrics import brier_distances, class_log_losses
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

EPS = 1e-15
"""Probabilities are clipped to [EPS, 1 - EPS] in the log loss, as everywhere."""


class Reference:
    """A version's fitting scores, prepared for the shift measures of its traffic.

    - PSI: the inner edges of the batch's deciles (:data:`PSI_BINS` bins, fewer when ties
      merge them) and the batch's share in each, floored at :data:`PSI_FLOOR`;
    - KS: the batch's distinct scores u_0 < … < u_{m-1} and its distribution function at
      each. A traffic score falls in one of 2m + 1 slots: below u_0, at u_j, or between u_j
      and u_{j+1}, or above u_{m-1}. Both distribution functions are constant on a slot, and
      one pass over the slots' counts gives sup |F_batch - F_traffic| exactly (the sup over
      every value either sample takes, as the two-sample statistic is defined), from counts
      that add up chunk by chunk.
    """

    def __init__(self, scores: FloatArray) -> None:
        self.size = scores.size
        self.inner = np.unique(np.quantile(scores, np.linspace(0, 1, PSI_BINS + 1)[1:-1]))
        expected = np.bincount(
            np.searchsorted(self.inner, scores, side="right"), minlength=self.inner.size + 1
        )
        self.expected = np.maximum(expected / max(self.size, 1), PSI_FLOOR)
        self.values, counts = np.unique(scores, return_counts=True)
        at_or_below = np.cumsum(counts) / max(self.size, 1)
        # F_batch on the slots: 0 below u_0, then F(u_j) at u_j and up to u_{j+1}
        self.slot_cdf = np.concatenate([[0.0], np.repeat(at_or_below, 2)])

    def psi_bins(self, scores: FloatArray) -> NDArray[np.intp]:
        """The PSI bin of each score."""
        return np.searchsorted(self.inner, scores, side="right")

    def slots(self, scores: FloatArray) -> NDArray[np.intp]:
        """The KS slot of each score: 2j below u_j (above u_{j-1}), 2j + 1 at u_j."""
        below = np.searchsorted(self.values, scores)
        at = np.zeros(scores.size, dtype=bool)
        inside = below < self.values.size
        at[inside] = self.values[below[inside]] == scores[inside]
        return 2 * below + at


class _Calibration:
    """Sums over one window's labelled predictions of one version: the counts, the
    predicted and observed sums, the losses, and the reliability bins' (uniform, ``n_bins``).
    Binary rows add p and y; k-class rows their top-label confidence and correctness."""

    def __init__(self, n_bins: int) -> None:
        self.inner = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
        self.n = 0
        self.predicted = self.observed = self.loss = self.brier = 0.0
        self.bins = np.zeros((3, n_bins))  # count, sum predicted, sum observed

    def add(
        self, predicted: FloatArray, observed: FloatArray, loss: FloatArray, brier: FloatArray
    ) -> None:
        self.n += predicted.size
        self.predicted += float(predicted.sum())
        self.observed += float(observed.sum())
        self.loss += float(loss.sum())
        self.brier += float(brier.sum())
        which = np.searchsorted(self.inner, predicted)  # the bins of reliability_bins
        for sums, values in zip(self.bins, (None, predicted, observed), strict=True):
            sums += np.bincount(which, values, minlength=sums.size)

    def result(self) -> dict[str, float]:
        """mean_predicted, observed_rate, log_loss, brier and ece: the ECE is sum over bins of
        (count / n) |mean observed - mean predicted|
        (:func:`~app.calibration.metrics.expected_calibration_error`)."""
        count, predicted, observed = self.bins
        filled = count > 0
        gaps = np.abs(observed[filled] - predicted[filled]) / count[filled]
        return {
            "mean_predicted": self.predicted / self.n,
            "observed_rate": self.observed / self.n,
            "log_loss": self.loss / self.n,
            "brier": self.brier / self.n,
            "ece": float(count[filled] / self.n @ gaps),
        }


class _Shift:
    """One window's raw scores of one binary version against its fitting batch: PSI and KS
    from counts (:class:`Reference`)."""

    def __init__(self, reference: Reference) -> None:
        self.reference = reference
        self.n = 0
        self.psi_counts = np.zeros(reference.inner.size + 1, dtype=np.int64)
        self.slot_counts = np.zeros(reference.slot_cdf.size, dtype=np.int64)

    def add(self, scores: FloatArray) -> None:
        self.n += scores.size
        self.psi_counts += np.bincount(
            self.reference.psi_bins(scores), minlength=self.psi_counts.size
        )
        self.slot_counts += np.bincount(
            self.reference.slots(scores), minlength=self.slot_counts.size
        )

    def result(self) -> dict[str, float]:
        """psi: sum over the bins of (a - e) ln(a / e), the shares a (traffic) and e (batch)
        floored at :data:`PSI_FLOOR`; ks: sup |F_batch - F_traffic|."""
        a = np.maximum(self.psi_counts / self.n, PSI_FLOOR)
        e = self.reference.expected
        traffic = np.cumsum(self.slot_counts) / self.n
        return {
            "psi": float(np.sum((a - e) * np.log(a / e))),
            "ks": float(np.max(np.abs(traffic - self.reference.slot_cdf))),
        }


class _Cell:
    """One window's traffic of one version: its counts and what it has summed so far."""

    def __init__(self) -> None:
        self.n_predictions = 0
        self.n_labelled = 0
        self.calibration: _Calibration | None = None
        self.shifted: dict[str, float] = {}  # psi and ks, once the window has been read


class Monitor:
    """Live calibration of a calibrator's traffic over the windows of a range, from the
    traffic read a chunk at a time (:meth:`add_traffic`, then :meth:`add_class_rows`), in
    memory that does not grow with the traffic: sums per window and version, and the KS
    slot counts of the window being read only (the rows come in time order).

    ``references`` are the fitting scores of the binary versions, prepared
    (:class:`Reference`); a version without one (deleted) gets no PSI or KS."""

    def __init__(
        self,
        since: datetime,
        until: datetime,
        window: Window,
        references: Mapping[int, Reference],
        *,
        version: int | None = None,
        n_bins: int = 10,
    ) -> None:
        self.since, self.until, self.window = since, until, window
        self.width = WINDOW_SECONDS[window]
        self.count = math.ceil((until.timestamp() - since.timestamp()) / self.width)
        self.references = references
        self.version = version
        self.n_bins = n_bins
        self.cells: dict[tuple[int, int], _Cell] = {}
        self.reading: dict[tuple[int, int], _Shift] = {}  # the windows being read
        self.k_class = False  # whether some rows are of k-class versions

    def add_traffic(self, chunk: FloatArray) -> None:
        """Rows of :data:`~app.store.traffic_reads.TRAFFIC_COLUMNS`, after every earlier
        chunk's in time."""
        if not chunk.size:
            return
        seconds, versions, scores, probabilities, labels = chunk.T
        windows = np.floor((seconds - self.since.timestamp()) / self.width).astype(np.int64)
        versions = versions.astype(np.int64)
        binary = np.isfinite(probabilities)
        self.k_class |= not binary.all()
        for (w, v), rows in _groups(windows, versions):
            cell = self._cell(w, v)
            cell.n_predictions += rows.size
            cell.n_labelled += int((labels[rows] >= 0).sum())  # k-class rows too
            rows = rows[binary[rows]]  # k-class rows: traffic, no metrics (add_class_rows)
            if not rows.size:
                continue
            y = labels[rows]
            known = rows[(y == 0) | (y == 1)]
            if known.size:
                p, t = probabilities[known], labels[known]
                cell.calibration = cell.calibration or _Calibration(self.n_bins)
                cell.calibration.add(p, t, log_losses(p, t, EPS), (p - t) ** 2)
            if v in self.references and self.references[v].size:
                shift = self.reading.get((w, v))
                if shift is None:
                    shift = self.reading[(w, v)] = _Shift(self.references[v])
                shift.add(scores[rows])
        self._close_before(int(windows[-1]))

    def add_class_rows(self, version: int, rows: ClassRows) -> None:
        """A k-class version's rows (after :meth:`add_traffic`): its windows' multiclass log
        loss and Brier score, the top-label ECE, and the mean top-label confidence
        (``mean_predicted``) against the accuracy (``observed_rate``), the top-label reading
        of predicted against observed, on the labelled ones."""
        k = rows.probabilities.shape[1]
        labelled = (rows.labels >= 0) & (rows.labels < k)
        seconds = rows.seconds[labelled]
        windows = np.floor((seconds - self.since.timestamp()) / self.width).astype(np.int64)
        P, y = rows.probabilities[labelled], rows.labels[labelled]
        top = np.argmax(P, axis=1)
        confidence, correct = P[np.arange(y.size), top], (top == y).astype(np.float64)
        losses, distances = class_log_losses(P, y, EPS), brier_distances(P, y)
        for (w, _), at in _groups(windows, np.full(windows.size, version)):
            cell = self._cell(w, version)
            cell.calibration = cell.calibration or _Calibration(self.n_bins)
            cell.calibration.add(confidence[at], correct[at], losses[at], distances[at])

    def rows(self) -> list[dict[str, Any]]:
        """One row per window of [since, until) and version that answered in it (or the one
        ``version``), oldest first; a window without traffic is one row of zeros and nulls."""
        self._close_before(self.count)
        present: dict[int, list[int]] = {}
        for w, answered in sorted(self.cells):
            present.setdefault(w, []).append(answered)
        rows = []
        for w in range(self.count):
            begin = self.since + timedelta(seconds=w * self.width)
            end = min(begin + timedelta(seconds=self.width), self.until)
            wanted: list[int | None] = (
                [self.version] if self.version is not None else [*present.get(w, ())] or [None]
            )
            for v in wanted:
                cell = self.cells.get((w, v)) if v is not None else None
                rows.append(_row(cell or _Cell(), begin, end, v))
        return rows

    def _cell(self, w: int, v: int) -> _Cell:
        cell = self.cells.get((w, v))
        if cell is None:
            cell = self.cells[(w, v)] = _Cell()
        return cell

    def _close_before(self, w: int) -> None:
        """The shift of each window before ``w``, whose rows have all been read: computed,
        and its slot counts let go."""
        for key in [key for key in self.reading if key[0] < w]:
            self.cells[key].shifted = self.reading.pop(key).result()


def _groups(
    windows: NDArray[np.int64], versions: NDArray[np.int64]
) -> Iterator[tuple[tuple[int, int], NDArray[np.intp]]]:
    """The row indices of each (window, version) in a chunk, in row order within each."""
    if not windows.size:
        return
    order = np.lexsort((versions, windows))
    keys = np.stack([windows[order], versions[order]])
    starts = np.flatnonzero(np.any(keys[:, 1:] != keys[:, :-1], axis=0)) + 1
    for part in np.split(order, starts):
        yield (int(windows[part[0]]), int(versions[part[0]])), part


def _row(cell: _Cell, start: datetime, end: datetime, version: int | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "start": start,
        "end": end,
        "version": version,
        "n_predictions": cell.n_predictions,
        "n_labelled": cell.n_labelled,
        "mean_predicted": None,
        "observed_rate": None,
        "log_loss": None,
        "brier": None,
        "ece": None,
        "psi": None,
        "ks": None,
    }
    if cell.calibration is not None:
        row.update(cell.calibration.result())
    row.update(cell.shifted)
    return row
