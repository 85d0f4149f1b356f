"""Live calibration of a calibrator's logged traffic, window by window and version by version.

For each time window (``1h``, ``1d`` or ``7d``) and each version that answered in it:

- traffic: ``n_predictions`` logged, ``n_labelled`` with an outcome;
- calibration on the labelled ones: the mean predicted probability against the observed
  rate, log loss, Brier score and the binned ECE, as
  :func:`app.calibration.measures.metrics.summarize` defines them;
- a shift of the raw scores against the version's fitting batch that needs no labels: the
  population stability index over the batch's deciles and the two-sample
  Kolmogorov-Smirnov statistic read at its percentiles (:class:`~app.calibration.ScoreReference`);
- 95% intervals on the window's log loss, Brier score and ECE (``resamples`` draws), from
  sums too (:meth:`~app.service.traffic.sums.CalibrationSums.intervals`).

A window without traffic is one row of zeros and nulls, as an empty reliability bin is.
A k-class version's window has the multiclass log loss and Brier score, the top-label ECE,
and its mean top-label confidence against its accuracy (:meth:`Monitor.add_class_rows`); no
PSI or KS, its raw scores being rows. A binary version's window is the sum of its stored
hours and of its rows no stored hour holds (:class:`~app.calibration.BinaryRollup`,
:mod:`app.service.traffic.gathering`), so memory does not grow with the traffic.
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
    BinaryRollup,
    ScoreReference,
    brier_distances,
    multiclass_log_losses,
    top_label,
)
from app.errors import invalid
from app.service.traffic.expectations import (
    ClassWindow,
    WindowExpectations,
    binary_expectations,
)
from app.service.traffic.sums import CalibrationSums
from app.service.traffic.window_rows import window_row
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
    """One window's traffic of one version: its counts, and what it has summed so far."""

    def __init__(self) -> None:
        self.n_predictions = 0
        self.n_labelled = 0
        self.rollup: BinaryRollup | None = None  # a binary version's
        self.unscored = False  # whether some of its stored predictions have no score bin
        self.calibration: CalibrationSums | None = None  # a k-class version's
        self.expectations: WindowExpectations | None = None  # a k-class one's, once read


class Monitor:
    """Live calibration of a calibrator's traffic over the windows of a range, fed stored
    hours (:meth:`add_rollup`) and rows (:meth:`add_traffic`, then :meth:`add_class_rows`)
    in memory that does not grow with the traffic: a binary version's window is a
    :class:`~app.calibration.BinaryRollup` (the stored hours it holds, and its other rows
    summed the same way), a k-class version's window its sums (:mod:`.sums`) and, while its
    rows are read, its sample (the rows come in time order, and a window is closed as soon
    as a later one's rows arrive).

    ``references`` are the score bins of the binary versions' fitting batches; a version
    without one (deleted) gets no PSI or KS. ``priors`` are the versions' training priors
    (:func:`app.service.estimates.version_priors`); a version without them gets no
    ``prior``. ``threshold`` is the one ``estimated`` and ``realized`` decide at
    (:mod:`app.service.traffic.expectations`). ``window`` None: the range is one window."""

    def __init__(
        self,
        since: datetime,
        until: datetime,
        window: Window | None,
        references: Mapping[int, ScoreReference],
        *,
        priors: Mapping[int, FloatArray] | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        version: int | None = None,
        n_bins: int = 10,
        resamples: int = 0,
    ) -> None:
        self.since, self.until = since, until
        whole = max(math.ceil(until.timestamp() - since.timestamp()), 1)
        self.width = whole if window is None else WINDOW_SECONDS[window]
        self.count = math.ceil((until.timestamp() - since.timestamp()) / self.width)
        self.references = references
        self.priors = priors or {}
        self.threshold = threshold
        self.version = version
        self.n_bins = n_bins
        self.resamples = resamples
        self.sums: dict[tuple[int, int], _WindowSums] = {}
        self.open_windows: dict[tuple[int, int], ClassWindow] = {}  # being read

    def window_bounds(self, w: int) -> tuple[datetime, datetime]:
        """Where window ``w`` (0, 1, … from ``since``) starts and ends."""
        begin = self.since + timedelta(seconds=w * self.width)
        return begin, min(begin + timedelta(seconds=self.width), self.until)

    def window_of(self, moment: datetime) -> int:
        """The window that holds ``moment``."""
        return int(self._windows(np.array([moment.timestamp()]))[0])

    def add_rollup(self, start: datetime, version: int, rollup: BinaryRollup) -> None:
        """A binary version's stored hour (or day) that starts at ``start``, within one
        window."""
        sums = self._sums(self.window_of(start), version)
        reference = self.references.get(version)
        if (
            reference is not None
            and rollup.n
            and (rollup.scores.size != reference.bins or int(rollup.scores.sum()) != rollup.n)
        ):
            # hours that counted no raw scores (a version without score bins), or a day
            # holding some of those: no shift for the window
            sums.unscored = True
        sums.n_predictions += rollup.n
        sums.n_labelled += rollup.n_labelled
        if sums.rollup is None:
            sums.rollup = BinaryRollup(rollup.scores.size)
        sums.rollup.add(rollup)

    def add_traffic(self, chunk: FloatArray) -> set[int]:
        """Rows of :data:`~app.store.traffic.reads.TRAFFIC_COLUMNS`: a binary version's are
        summed as its stored hours are; the windows that hold a k-class version's, which
        :meth:`add_class_rows` takes."""
        if not chunk.size:
            return set()
        binary = np.isfinite(chunk[:, 3])
        k_class = set(np.unique(self._windows(chunk[~binary, 0])).tolist())
        seconds, versions, scores, probabilities, labels = chunk[binary].T
        windows = self._windows(seconds)
        for (w, v), indices in _by_window_and_version(windows, versions.astype(np.int64)):
            sums = self._sums(w, v)
            sums.n_predictions += indices.size
            sums.n_labelled += int((labels[indices] >= 0).sum())
            reference = self.references.get(v)
            if sums.rollup is None:
                sums.rollup = BinaryRollup(0 if reference is None else reference.bins)
            p = probabilities[indices]
            score_bins = None if reference is None else reference.bin_of(scores[indices])
            sums.rollup.add_predictions(p, score_bins)
            known = labels[indices] >= 0
            sums.rollup.add_labels(p[known], labels[indices][known])
        return k_class

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
            sums = self._sums(w, version)
            sums.n_predictions += indices.size
            sums.n_labelled += int((rows.labels[indices] >= 0).sum())
            window = self.open_windows.get((w, version))
            if window is None:
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
        self._close_windows_before(self.count)
        answered: dict[int, list[int | None]] = {}
        for w, v in sorted(self.sums):
            answered.setdefault(w, []).append(v)
        rows = []
        for w in range(self.count):
            begin, end = self.window_bounds(w)
            wanted = [self.version] if self.version is not None else answered.get(w) or [None]
            for version in wanted:
                sums = self.sums.get((w, version)) if version is not None else None
                rows.append(self._row(sums or _WindowSums(), begin, end, version))
        return rows

    def _row(
        self, sums: _WindowSums, start: datetime, end: datetime, version: int | None
    ) -> dict[str, Any]:
        calibration = sums.calibration
        expectations = sums.expectations
        shift = None
        if sums.rollup is not None and version is not None:
            rollup = sums.rollup
            calibration = CalibrationSums.of_rollup(rollup, self.n_bins)
            expectations = binary_expectations(rollup, self.threshold, self.priors.get(version))
            reference = self.references.get(version)
            if reference is not None and rollup.scores.size == reference.bins and not sums.unscored:
                shift = reference.shift(rollup.scores)
        return window_row(
            (sums.n_predictions, sums.n_labelled),
            calibration,
            expectations,
            shift,
            start,
            end,
            version,
            self.resamples,
        )

    def _windows(self, seconds: FloatArray) -> NDArray[np.int64]:
        """The window (0, 1, … from ``since``) of each time."""
        return np.floor((seconds - self.since.timestamp()) / self.width).astype(np.int64)

    def _sums(self, w: int, v: int) -> _WindowSums:
        sums = self.sums.get((w, v))
        if sums is None:
            sums = self.sums[(w, v)] = _WindowSums()
        return sums

    def _close_windows_before(self, w: int) -> None:
        """The expectations of each k-class window before ``w``: summarised, and its sample
        let go."""
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
