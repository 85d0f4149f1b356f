"""The in-process cache of loaded calibrators, so predict rarely touches the database.

Entries are keyed by (name, version). A pinned version never changes, but it may be deleted
(through any replica), so an entry is re-validated with one cheap indexed read once it is
older than ``refresh_seconds``; ``latest`` is resolved the same way. Together this is the
freshness contract of API.md: a new version is served as ``latest`` by every replica within
``refresh_seconds`` of its fit answering 201, and a deleted version stops being served as fast.
Aliases are resolved like ``latest``: a moved alias is followed within the same window.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.batch import check_scores
from app.calibration.base import CalibrationError, Calibrator
from app.calibration.multiclass import MulticlassCalibrator
from app.errors import invalid


@dataclass(frozen=True)
class LoadedVersion:
    """A version ready to predict: its row id (never reused), method, number of classes and
    fitted calibrator (binary: vectors in and out; multiclass: n x k matrices)."""

    version_id: int
    name: str
    version: int
    method: str
    n_classes: int
    calibrator: Calibrator | MulticlassCalibrator
    state: dict[str, Any]

    def checked_predict(self, scores: NDArray[np.float64]) -> NDArray[np.float64]:
        """The probabilities for scores of the version's shape, all finite (else 422)."""
        self.check_shape(scores)
        check_scores(scores)
        return self.predict(scores)

    def predict(self, scores: NDArray[np.float64]) -> NDArray[np.float64]:
        """The calibrated probabilities; scores the method refuses (bostrom: rows that are not
        probability vectors) are a 422 naming ``scores``, never a 500."""
        try:
            probabilities: NDArray[np.float64] = self.calibrator.predict(scores)
        except CalibrationError as exc:
            raise invalid(("body", "scores"), f"{exc} ({self.name!r} v{self.version})") from None
        return probabilities

    def check_shape(self, scores: NDArray[np.float64]) -> None:
        """Vectors for binary versions, n x k matrices for k-class versions (else 422)."""
        where = f"{self.name!r} v{self.version}"
        if self.n_classes == 2 and scores.ndim != 1:
            raise invalid(
                ("body", "scores"),
                f"is a matrix but {where} is a binary calibrator; send one score per element",
            )
        if self.n_classes > 2 and (scores.ndim != 2 or scores.shape[1] != self.n_classes):
            shape = "a vector" if scores.ndim == 1 else f"an n x {scores.shape[1]} matrix"
            raise invalid(
                ("body", "scores"),
                f"is {shape} but {where} calibrates {self.n_classes} classes; "
                f"send an n x {self.n_classes} matrix",
            )


@dataclass
class _Entry:
    loaded: LoadedVersion
    checked_at: float


class LoadedVersions:
    """A bounded LRU of :class:`LoadedVersion` plus a short-lived map name → latest version."""

    def __init__(
        self,
        *,
        capacity: int = 256,
        refresh_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._capacity = capacity
        self._refresh = refresh_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, int], _Entry] = OrderedDict()
        self._labels: dict[tuple[str, str], tuple[int, float]] = {}

    def fresh_label(self, name: str, label: str) -> int | None:
        """The version ``latest`` or an alias of ``name`` pointed to, if that was confirmed
        within the refresh window."""
        with self._lock:
            hit = self._labels.get((name, label))
        if hit is None or self._clock() - hit[1] >= self._refresh:
            return None
        return hit[0]

    def label_with_age(self, name: str, label: str) -> tuple[int, float] | None:
        """(version, seconds since it was confirmed) for ``latest`` or an alias, if known."""
        with self._lock:
            hit = self._labels.get((name, label))
        return None if hit is None else (hit[0], self._clock() - hit[1])

    def entry_with_age(self, name: str, version: int) -> tuple[LoadedVersion, float] | None:
        """(loaded version, seconds since it was confirmed), if loaded."""
        with self._lock:
            entry = self._entries.get((name, version))
            if entry is None:
                return None
            self._entries.move_to_end((name, version))
            return entry.loaded, self._clock() - entry.checked_at

    def remember_label(self, name: str, label: str, version: int) -> None:
        with self._lock:
            self._labels[(name, label)] = (version, self._clock())

    def get(self, name: str, version: int) -> tuple[LoadedVersion | None, bool]:
        """(entry or None, whether it was confirmed within the refresh window)."""
        with self._lock:
            entry = self._entries.get((name, version))
            if entry is None:
                return None, False
            self._entries.move_to_end((name, version))
            return entry.loaded, self._clock() - entry.checked_at < self._refresh

    def put(self, loaded: LoadedVersion) -> None:
        with self._lock:
            key = (loaded.name, loaded.version)
            self._entries[key] = _Entry(loaded, self._clock())
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def forget(self, name: str, version: int | None = None) -> None:
        """Drop one version of ``name`` (or all of them) and its cached ``latest`` and aliases."""
        with self._lock:
            for label in [k for k in self._labels if k[0] == name]:
                del self._labels[label]
            doomed = [k for k in self._entries if k[0] == name and version in (None, k[1])]
            for entry in doomed:
                del self._entries[entry]
