"""What calls answer: frozen dataclasses read once from the service's JSON, arrays as numpy.

Each keeps the whole document it was read from as ``document``, so that fields this client
does not name yet stay reachable."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

Document = dict[str, Any]


@dataclass(frozen=True)
class Version:
    """One stored version of a calibrator: what was fitted, on how much, and how it scores.

    ``metrics`` holds ``cv`` (out-of-fold on the batch) and ``raw`` (the raw scores);
    ``selection`` is set for ``method="auto"``; ``document`` is the whole JSON document."""

    name: str
    version: int
    method: str
    n_samples: int
    n_positive: int | None
    n_classes: int
    params: dict[str, Any]
    fitted: dict[str, Any]
    metrics: dict[str, Any]
    selection: dict[str, Any] | None
    aliases: list[str]
    created_at: datetime
    description: str
    tags: dict[str, str]
    source: dict[str, Any] | None
    document: Document = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Document) -> Version:
        """A version from the service's version document."""
        return cls(
            name=data["name"],
            version=int(data["version"]),
            method=data["method"],
            n_samples=int(data["n_samples"]),
            n_positive=data.get("n_positive"),
            n_classes=int(data["n_classes"]),
            params=data.get("params") or {},
            fitted=data.get("fitted") or {},
            metrics=data.get("metrics") or {},
            selection=data.get("selection"),
            aliases=list(data.get("aliases") or []),
            created_at=datetime.fromisoformat(data["created_at"]),
            description=data.get("description") or "",
            tags=data.get("tags") or {},
            source=data.get("source"),
            document=data,
        )


@dataclass(frozen=True, eq=False)  # arrays: == would be ambiguous
class Prediction:
    """Calibrated probabilities, (n,) for a binary calibrator or (n, k), and the version
    that made them. ``intervals`` (venn_abers, when asked) is (n, 2) or (n, k, 2)."""

    name: str
    version: int
    probabilities: NDArray[np.float64]
    intervals: NDArray[np.float64] | None = None
    decisions: NDArray[np.int64] | None = None
    logged: int | None = None

    @classmethod
    def from_json(cls, data: Document) -> Prediction:
        """A prediction from ``/v1`` predict's answer."""
        intervals, decisions = data.get("intervals"), data.get("decisions")
        return cls(
            name=data["name"],
            version=int(data["version"]),
            probabilities=np.asarray(data["probabilities"], dtype=np.float64),
            intervals=None if intervals is None else np.asarray(intervals, dtype=np.float64),
            decisions=None if decisions is None else np.asarray(decisions, dtype=np.int64),
            logged=data.get("logged"),
        )


@dataclass(frozen=True)
class OutcomeReceipt:
    """What became of posted outcomes: joined to a logged prediction, waiting for one, or
    already recorded with the same label."""

    matched: int
    pending: int
    duplicates: int
    overwritten: int = 0

    @classmethod
    def from_json(cls, data: Document) -> OutcomeReceipt:
        """A receipt from the outcomes answer."""
        return cls(
            matched=int(data["matched"]),
            pending=int(data["pending"]),
            duplicates=int(data["duplicates"]),
            overwritten=int(data.get("overwritten") or 0),
        )


_BIN_FIELDS = ("lower", "upper", "mean_predicted", "fraction_positive", "ci_low", "ci_high")


@dataclass(frozen=True, eq=False)  # arrays: == would be ambiguous
class ReliabilityCurve:
    """A reliability diagram's bins as arrays, one entry a bin (NaN where a bin is empty),
    and the metrics of the predictions binned (with their ``intervals`` when computed)."""

    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    count: NDArray[np.int64]
    mean_predicted: NDArray[np.float64]
    fraction_positive: NDArray[np.float64]
    ci_low: NDArray[np.float64]
    ci_high: NDArray[np.float64]
    metrics: dict[str, Any]

    @classmethod
    def from_json(cls, data: Document) -> ReliabilityCurve:
        """A curve from a diagnostics document's ``calibrated`` or ``raw`` member."""
        bins = data.get("bins") or []
        columns = {
            key: np.array(
                [np.nan if b.get(key) is None else b[key] for b in bins], dtype=np.float64
            )
            for key in _BIN_FIELDS
        }
        count = np.array([b.get("count") or 0 for b in bins], dtype=np.int64)
        return cls(count=count, metrics=data.get("metrics") or {}, **columns)


@dataclass(frozen=True, eq=False)  # arrays: == would be ambiguous
class Diagnostics:
    """The reliability of a version's predictions (out-of-fold on its fitting batch, or on a
    posted batch) beside that of the raw scores."""

    name: str
    version: int
    n_bins: int
    strategy: str
    calibrated: ReliabilityCurve
    raw: ReliabilityCurve
    document: Document = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Document) -> Diagnostics:
        """Diagnostics from the service's diagnostics document."""
        return cls(
            name=data["name"],
            version=int(data["version"]),
            n_bins=int(data["n_bins"]),
            strategy=data["strategy"],
            calibrated=ReliabilityCurve.from_json(data["calibrated"]),
            raw=ReliabilityCurve.from_json(data["raw"]),
            document=data,
        )


@dataclass(frozen=True)
class RankedVersion:
    """One version in a comparison: its value of the ranking metric, its difference from the
    best with the paired bootstrap interval, and whether that interval excludes 0."""

    version: int
    method: str
    value: float | None
    difference: float | None
    interval: tuple[float, float] | None
    significant: bool
    metrics: dict[str, Any]


@dataclass(frozen=True)
class Comparison:
    """Versions ranked on a labelled batch, best first; ``raw`` holds the metrics of the raw
    scores themselves (as in :class:`Diagnostics`)."""

    name: str
    by: str
    n_samples: int
    ranking: list[RankedVersion]
    raw: dict[str, Any]
    document: Document = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Document) -> Comparison:
        """A comparison from the compare answer."""
        by = data["by"]
        ranking = []
        for entry in data.get("versions") or []:
            difference = entry.get("difference") or {}
            interval = difference.get("interval")
            ranking.append(
                RankedVersion(
                    version=int(entry["version"]),
                    method=entry.get("method", ""),
                    value=(entry.get("metrics") or {}).get(by),
                    difference=difference.get("value"),
                    interval=None if interval is None else (interval[0], interval[1]),
                    significant=bool(entry.get("significant")),
                    metrics=entry.get("metrics") or {},
                )
            )
        return cls(
            name=data["name"],
            by=by,
            n_samples=int(data["n_samples"]),
            ranking=ranking,
            raw=data.get("raw") or {},
            document=data,
        )
