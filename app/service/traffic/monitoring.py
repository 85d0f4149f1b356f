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
and its mean top-label confidence against its accuracy; no PSI or KS, its raw scores being
rows. A version's window is the sum of its stored hours (or days) and of its rows no stored
hour holds, summed the same way (:class:`~app.calibration.BinaryRollup`,
:class:`~app.calibration.ClassRollup`, :mod:`app.service.traffic.gathering`), so memory
does not grow with the traffic.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    CLASS_SAMPLE_ENTRIES,
    DEFAULT_THRESHOLD,
    BinaryRollup,
    ClassRollup,
    ScoreReference,
)
from app.errors import invalid
from app.service.traffic.expectations import (
    WindowExpectations,
    binary_expectations,
    class_expectations,
)
from app.service.traffic.sums import CalibrationSums
from app.service.traffic.window_rows import window_row
from app.store import ClassRows

FloatArray = NDArray[np.float64]
Window = Literal["1h", "1d", "7d"]
WINDOW_SECONDS: dict[str, int] = {"1h": 3600, "1d": 86_400, "7d": 7 * 86_400}
MAX_WINDOWS = 1000
"""The most windows one request may span."""
SAMPLE_BUDGET = 4_000_000
"""The numbers of k-class EM samples one request holds over all its windows (48 MB with their
keys): a window keeps each hour's lowest-key rows within its share
(:meth:`~app.calibration.ClassRollup.limit`)."""

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
        self.classes: ClassRollup | None = None  # a k-class version's


class Monitor:
    """Live calibration of a calibrator's traffic over the windows of a range, fed stored
    hours (:meth:`add_rollup`) and rows (:meth:`add_traffic`, :meth:`add_class_rows`) in
    memory that does not grow with the traffic: a version's window is a
    :class:`~app.calibration.BinaryRollup` or :class:`~app.calibration.ClassRollup` (the
    stored hours it holds, and its other rows summed the same way).

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

    def window_bounds(self, w: int) -> tuple[datetime, datetime]:
        """Where window ``w`` (0, 1, … from ``since``) starts and ends."""
        begin = self.since + timedelta(seconds=w * self.width)
        return begin, min(begin + timedelta(seconds=self.width), self.until)

    def window_of(self, moment: datetime) -> int:
        """The window that holds ``moment``."""
        return int(self._windows(np.array([moment.timestamp()]))[0])

    def add_rollup(self, start: datetime, version: int, rollup: BinaryRollup | ClassRollup) -> None:
        """A version's stored hour (or day) that starts at ``start``, within one window, or
        its rows summed the same way."""
        sums = self._sums(self.window_of(start), version)
        sums.n_predictions += rollup.n
        sums.n_labelled += rollup.n_labelled
        if isinstance(rollup, ClassRollup):
            if sums.classes is None:
                sums.classes = ClassRollup(rollup.k)
            sums.classes.add(rollup)
            sums.classes.limit(max(CLASS_SAMPLE_ENTRIES, SAMPLE_BUDGET // self.count))
            return
        reference = self.references.get(version)
        if (
            reference is not None
            and rollup.n
            and (rollup.scores.size != reference.bins or int(rollup.scores.sum()) != rollup.n)
        ):
            # hours that counted no raw scores (a version without score bins), or a day
            # holding some of those: no shift for the window
            sums.unscored = True
        if sums.rollup is None:
            sums.rollup = BinaryRollup(rollup.scores.size)
        sums.rollup.add(rollup)

    def add_traffic(self, chunk: FloatArray) -> None:
        """Rows of :data:`~app.store.traffic.reads.TRAFFIC_COLUMNS`: a binary version's are
        summed as its stored hours are (a k-class version's come to
        :meth:`add_class_rows`)."""
        if not chunk.size:
            return
        binary = np.isfinite(chunk[:, 3])
        seconds, versions, scores, probabilities, labels = chunk[binary].T
        windows = self._windows(seconds)
        for (w, v), indices in _by_pair(windows, versions.astype(np.int64)):
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

    def add_class_rows(self, version: int, rows: ClassRows) -> None:
        """A k-class version's rows: summed by hour as its stored hours are
        (:class:`~app.calibration.ClassRollup`), into their windows."""
        hours = (rows.seconds // 3600).astype(np.int64)
        windows = self._windows(rows.seconds)
        for (w, hour), indices in _by_pair(windows, hours):
            ids = [rows.ids[i] for i in indices.tolist()]
            delta = ClassRollup.of_hour(
                rows.probabilities[indices], rows.labels[indices], ids, hour
            )
            self.add_rollup(self.window_bounds(w)[0], version, delta)

    def forget(self, w: int, version: int) -> None:
        """Drop what window ``w`` of ``version`` has summed: its rows are read whole."""
        self.sums.pop((w, version), None)

    def rows(self) -> list[dict[str, Any]]:
        """One row per window of [since, until) and version that answered in it (or the one
        ``version``), oldest first; a window without traffic is one row of zeros and nulls."""
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
        calibration: CalibrationSums | None = None
        expectations: WindowExpectations | None = None
        shift = None
        if sums.classes is not None and version is not None:
            calibration = CalibrationSums.of_rollup(sums.classes.top, self.n_bins)
            expectations = class_expectations(sums.classes, self.priors.get(version))
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


def _by_pair(
    windows: NDArray[np.int64], versions: NDArray[np.int64]
) -> Iterator[tuple[tuple[int, int], NDArray[np.intp]]]:
    """The row indices of each (window, version) in a chunk (or of any other pair of
    integer columns), in row order within each."""
    if not windows.size:
        return
    order = np.lexsort((versions, windows))
    keys = np.stack([windows[order], versions[order]])
    starts = np.flatnonzero(np.any(keys[:, 1:] != keys[:, :-1], axis=0)) + 1
    for part in np.split(order, starts):
        yield (int(windows[part[0]]), int(versions[part[0]])), part
