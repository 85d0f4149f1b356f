"""Live calibration of a calibrator's logged traffic, window by window and version by version.

For each time window (``1h``, ``1d`` or ``7d``) and each version that answered in it:

- traffic: ``n_predictions`` logged, ``n_labelled`` with an outcome;
- calibration on the labelled ones: the mean predicted probability against the observed
  rate, log loss, Brier score and the binned ECE, as
  :func:`app.calibration.measures.metrics.summarize` defines them;
- a shift of the raw scores against the version's fitting batch that needs no labels: the
  population stability index over the batch's deciles and the two-sample
  Kolmogorov-Smirnov statistic (:class:`~app.service.traffic.sums.Reference`);
- 95% intervals on the window's log loss, Brier score and ECE (``resamples`` draws), from
  sums too (:meth:`~app.service.traffic.sums.CalibrationSums.intervals`).

A window without traffic is one row of zeros and nulls, as an empty reliability bin is.
A k-class version's window has the multiclass log loss and Brier score, the top-label ECE,
and its mean top-label confidence against its accuracy (:meth:`Monitor.add_class_rows`); no
PSI or KS, its raw scores being rows.

The traffic of a range can be far larger than memory (an hour at 10^4 predictions a second
is 3.6 x 10^7 rows), so :class:`Monitor` is fed it a chunk at a time and keeps sums
(:mod:`app.service.traffic.sums`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    DEFAULT_THRESHOLD,
    brier_distances,
    log_losses,
    multiclass_log_losses,
    squared_errors,
    top_label,
)
from app.errors import invalid
from app.service.traffic.expectations import BinaryWindow, ClassWindow, WindowExpectations
from app.service.traffic.sums import CalibrationSums, Reference, ShiftSums
from app.store import ClassRows

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


class _WindowSums:
    """One window's traffic of one version: its counts and what it has summed so far."""

    def __init__(self) -> None:
        self.n_predictions = 0
        self.n_labelled = 0
        self.calibration: CalibrationSums | None = None
        self.shift: dict[str, float] = {}  # psi and ks, once the window has been read
        self.expectations: WindowExpectations | None = None  # once the window is read


class Monitor:
    """Live calibration of a calibrator's traffic over the windows of a range, fed the
    traffic a chunk at a time (:meth:`add_traffic`, then :meth:`add_class_rows`), in memory
    that does not grow with the traffic: sums per window and version
    (:mod:`app.service.traffic.sums`), and KS slot counts (one per distinct score of a version's
    fitting batch, twice) only for the window being read: the rows come in time order, and
    a window is closed as soon as a later one's rows arrive, within a chunk too.

    ``references`` are the fitting batches of the binary versions, prepared; a version
    without one (deleted) gets no PSI or KS. ``priors`` are the versions' training priors
    (:func:`app.service.estimates.version_priors`); a version without them gets no
    ``prior``. ``threshold`` is the one ``estimated`` and ``realized`` decide at
    (:mod:`app.service.traffic.expectations`)."""

    def __init__(
        self,
        since: datetime,
        until: datetime,
        window: Window,
        references: Mapping[int, Reference],
        *,
        priors: Mapping[int, FloatArray] | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        version: int | None = None,
        n_bins: int = 10,
        resamples: int = 0,
    ) -> None:
        self.since, self.until = since, until
        self.width = WINDOW_SECONDS[window]
        self.count = math.ceil((until.timestamp() - since.timestamp()) / self.width)
        self.references = references
        self.priors = priors or {}
        self.threshold = threshold
        self.version = version
        self.n_bins = n_bins
        self.resamples = resamples
        self.sums: dict[tuple[int, int], _WindowSums] = {}
        self.open_shifts: dict[tuple[int, int], ShiftSums] = {}  # of the window being read
        self.open_windows: dict[tuple[int, int], BinaryWindow | ClassWindow] = {}  # likewise
        self.saw_k_class = False  # whether some rows are of k-class versions

    def add_traffic(self, chunk: FloatArray) -> None:
        """Rows of :data:`~app.store.traffic.reads.TRAFFIC_COLUMNS`, after every earlier
        chunk's in time."""
        if not chunk.size:
            return
        seconds, versions, scores, probabilities, labels = chunk.T
        windows = self._windows(seconds)
        binary = np.isfinite(probabilities)
        self.saw_k_class |= not binary.all()
        for (w, v), indices in _by_window_and_version(windows, versions.astype(np.int64)):
            self._close_before(w)  # windows come in order: the ones before w are read
            sums = self._sums(w, v)
            sums.n_predictions += indices.size
            sums.n_labelled += int((labels[indices] >= 0).sum())  # k-class rows too
            indices = indices[binary[indices]]  # k-class rows: traffic only (add_class_rows)
            if not indices.size:
                continue
            window = self.open_windows.get((w, v))
            if not isinstance(window, BinaryWindow):
                window = self.open_windows[(w, v)] = BinaryWindow(
                    self.threshold, self.priors.get(v)
                )
            window.add(probabilities[indices])
            y = labels[indices]
            known = indices[(y == 0) | (y == 1)]
            if known.size:
                p, t = probabilities[known], labels[known]
                sums.calibration = sums.calibration or CalibrationSums(self.n_bins)
                sums.calibration.add(p, t, log_losses(p, t), squared_errors(p, t))
                window.add_labelled(p, t)
            if v in self.references:
                shift = self.open_shifts.get((w, v))
                if shift is None:
                    shift = self.open_shifts[(w, v)] = ShiftSums(self.references[v])
                shift.add(scores[indices])

    def add_class_rows(self, version: int, rows: ClassRows) -> None:
        """A k-class version's rows (after :meth:`add_traffic`): its windows' multiclass log
        loss and Brier score, the top-label ECE, and the mean top-label confidence
        (``mean_predicted``) against the accuracy (``observed_rate``), the top-label reading
        of predicted against observed, on the labelled ones; and the expectations of all
        (:class:`~app.service.traffic.expectations.ClassWindow`). The rows come in time order
        across the calls, so the windows before this chunk's are closed."""
        k = rows.probabilities.shape[1]
        every = self._windows(rows.seconds)
        if every.size:
            self._close_windows_before(int(every.min()))
        for (w, _), indices in _by_window_and_version(every, np.full(every.size, version)):
            window = self.open_windows.get((w, version))
            if not isinstance(window, ClassWindow):
                window = self.open_windows[(w, version)] = ClassWindow(self.priors.get(version))
            window.add(rows.probabilities[indices])
        labelled = (rows.labels >= 0) & (rows.labels < k)
        if not labelled.any():
            return
        windows = self._windows(rows.seconds[labelled])
        P, y = rows.probabilities[labelled], rows.labels[labelled]
        confidence, correct = top_label(P, y)
        losses, distances = multiclass_log_losses(P, y), brier_distances(P, y)
        for (w, _), indices in _by_window_and_version(windows, np.full(y.size, version)):
            sums = self._sums(w, version)
            sums.calibration = sums.calibration or CalibrationSums(self.n_bins)
            sums.calibration.add(
                confidence[indices], correct[indices], losses[indices], distances[indices]
            )

    def rows(self) -> list[dict[str, Any]]:
        """One row per window of [since, until) and version that answered in it (or the one
        ``version``), oldest first; a window without traffic is one row of zeros and nulls."""
        self._close_before(self.count)
        answered: dict[int, list[int | None]] = {}
        for w, v in sorted(self.sums):
            answered.setdefault(w, []).append(v)
        rows = []
        for w in range(self.count):
            begin = self.since + timedelta(seconds=w * self.width)
            end = min(begin + timedelta(seconds=self.width), self.until)
            wanted = [self.version] if self.version is not None else answered.get(w) or [None]
            for version in wanted:
                sums = self.sums.get((w, version)) if version is not None else None
                rows.append(_row(sums or _WindowSums(), begin, end, version, self.resamples))
        return rows

    def _windows(self, seconds: FloatArray) -> NDArray[np.int64]:
        """The window (0, 1, … from ``since``) of each time."""
        return np.floor((seconds - self.since.timestamp()) / self.width).astype(np.int64)

    def _sums(self, w: int, v: int) -> _WindowSums:
        sums = self.sums.get((w, v))
        if sums is None:
            sums = self.sums[(w, v)] = _WindowSums()
        return sums

    def _close_before(self, w: int) -> None:
        """The shift of each window before ``w``, whose rows have all been read: computed,
        and its slot counts let go."""
        for key in [key for key in self.open_shifts if key[0] < w]:
            self.sums[key].shift = self.open_shifts.pop(key).result()
        self._close_windows_before(w)

    def _close_windows_before(self, w: int) -> None:
        """The expectations of each window before ``w``: summarised, and their bins let go."""
        for key in [key for key in self.open_windows if key[0] < w]:
            self._sums(*key).expectations = self.open_windows.pop(key).close()


def _by_window_and_version(
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


def _row(
    sums: _WindowSums, start: datetime, end: datetime, version: int | None, resamples: int
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "start": start,
        "end": end,
        "version": version,
        "n_predictions": sums.n_predictions,
        "n_labelled": sums.n_labelled,
        "mean_predicted": None,
        "observed_rate": None,
        "log_loss": None,
        "brier": None,
        "ece": None,
        "psi": None,
        "ks": None,
    }
    calibration = None if sums.calibration is None else sums.calibration.result()
    if sums.calibration is not None and calibration is not None:
        row.update(calibration)
        intervals = sums.calibration.intervals(resamples)
        if intervals:
            row["intervals"] = {k: list(v) for k, v in intervals.items()}
    row.update(sums.shift)
    expectations = sums.expectations
    row["estimated"] = None if expectations is None else expectations.estimated
    row["realized"] = None if expectations is None else expectations.realized(calibration)
    row["prior"] = None if expectations is None else expectations.prior
    return row
