"""What the calls of the traffic loop and of decisions answer (``estimate``, ``decision``,
``monitoring``): frozen dataclasses read once from the service's JSON, as ``_types.py``'s are.

A :class:`Prior` is P(y = 1) for a binary version, as plain floats, and a vector of class
shares for a k-class one, as numpy arrays: ``isinstance(prior.training, float)`` tells them
apart."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from calibration_client._types import Document

Interval = tuple[float, float]
"""A 95% interval, (low, high)."""
PERFORMANCE_MEASURES = (
    "positive_rate",
    "accuracy",
    "precision",
    "recall",
    "f1",
    "roc_auc",
    "log_loss",
    "brier",
)


def _number(value: Any) -> float | None:
    """An optional number of the answer (null stays None)."""
    return None if value is None else float(value)


def _interval(value: Any) -> Interval:
    low, high = value  # (ValueError unless two)
    return float(low), float(high)


def _intervals(value: Any) -> dict[str, Interval]:
    """A document's ``intervals`` object, each ``[low, high]`` as a tuple; absent: empty."""
    return {str(key): _interval(pair) for key, pair in (value or {}).items()}


@dataclass(frozen=True)
class Performance:
    """Performance measures of probabilities at a threshold: what they say if calibrated
    (``estimated``: CBPE, with each measure's 95% sampling band in ``intervals``), or what
    the labels say (``realized``, no intervals).

    Binary versions have every measure; k-class ones ``accuracy`` (of the argmax),
    ``log_loss`` and ``brier``, the others None. None also where a measure is undefined
    (precision with no predicted positive) or there is nothing to measure."""

    positive_rate: float | None = None
    accuracy: float | None = None
    precision: float | None = None
    recall: float | None = None
    f1: float | None = None
    roc_auc: float | None = None
    log_loss: float | None = None
    brier: float | None = None
    intervals: dict[str, Interval] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Document) -> Performance:
        """Measures from an ``estimated`` or ``realized`` object."""
        measures = {key: _number(data.get(key)) for key in PERFORMANCE_MEASURES}
        return cls(**measures, intervals=_intervals(data.get("intervals")))

    @classmethod
    def read(cls, data: Document | None) -> Performance | None:
        """Measures from an object that may be null (a window without traffic or labels)."""
        return None if data is None else cls.from_json(data)


@dataclass(frozen=True, eq=False)  # arrays: == would be ambiguous
class Prior:
    """Label shift: the class prior a version computes under (``training``: its fitting
    batch's, weighted; for an adjusted version, the prior it was adjusted to) and the one its
    probabilities of a batch imply (``estimated``, by Saerens et al.'s EM, with its 95%
    ``interval``; None without predictions).

    A binary version's are P(y = 1): floats, and ``interval`` a (low, high) tuple. A k-class
    version's are (k,) arrays of class shares, and ``interval`` a (k, 2) array, a row per
    class."""

    training: float | NDArray[np.float64]
    estimated: float | NDArray[np.float64] | None
    interval: Interval | NDArray[np.float64] | None

    @classmethod
    def from_json(cls, data: Document) -> Prior:
        """A prior from a ``prior`` object."""
        training, estimated, interval = data["training"], data["estimated"], data["interval"]
        if not isinstance(training, list):  # binary
            return cls(
                training=float(training),
                estimated=_number(estimated),
                interval=None if interval is None else _interval(interval),
            )
        shares = np.asarray(training, dtype=np.float64)
        k = shares.shape[0]
        return cls(
            training=_shaped(shares, (k,)),
            estimated=None if estimated is None else _shaped(estimated, (k,)),
            interval=None if interval is None else _shaped(interval, (k, 2)),
        )

    @classmethod
    def read(cls, data: Document | None) -> Prior | None:
        """A prior from an object that may be null (a window without traffic)."""
        return None if data is None else cls.from_json(data)


def _shaped(values: Any, shape: tuple[int, ...]) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=np.float64)
    if array.shape != shape:
        raise ValueError(f"expected an array of shape {shape}, got {array.shape}")
    return array


@dataclass(frozen=True, eq=False)  # holds a Prior: == would be ambiguous
class Estimate:
    """What a version's probabilities of an unlabelled batch say, if they are calibrated:
    ``estimated`` performance at ``threshold`` (None for a k-class version), and the batch's
    ``prior`` beside the version's training prior. Nothing was stored."""

    name: str
    version: int
    n_predictions: int
    threshold: float | None
    estimated: Performance
    prior: Prior
    document: Document = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Document) -> Estimate:
        """An estimate from the estimate answer."""
        return cls(
            name=data["name"],
            version=int(data["version"]),
            n_predictions=int(data["n_predictions"]),
            threshold=_number(data["threshold"]),
            estimated=Performance.from_json(data["estimated"]),
            prior=Prior.from_json(data["prior"]),
            document=data,
        )


@dataclass(frozen=True)
class DecisionCost:
    """Deciding 1 above ``threshold``: the mean cost per case on the version's out-of-fold
    predictions and their labels (benefits count negative), with its 95% interval."""

    threshold: float
    expected_cost: float
    interval: Interval

    @classmethod
    def from_json(cls, data: Document) -> DecisionCost:
        """A threshold and its cost from a decision answer (or its ``at_half``)."""
        return cls(
            threshold=float(data["threshold"]),
            expected_cost=float(data["expected_cost"]),
            interval=_interval(data["intervals"]["expected_cost"]),
        )


@dataclass(frozen=True)
class Decision:
    """The threshold that minimises the expected cost for calibrated probabilities,
    (c_FP + b_TN) / (c_FP + b_TN + c_FN + b_TP), and the mean cost per case of deciding at
    it (``expected_cost``, with its 95% ``interval``), beside deciding at 0.5 (``at_half``)."""

    name: str
    version: int
    threshold: float
    expected_cost: float
    interval: Interval
    at_half: DecisionCost
    document: Document = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Document) -> Decision:
        """A decision from the decision answer."""
        best = DecisionCost.from_json(data)
        return cls(
            name=data["name"],
            version=int(data["version"]),
            threshold=best.threshold,
            expected_cost=best.expected_cost,
            interval=best.interval,
            at_half=DecisionCost.from_json(data["at_half"]),
            document=data,
        )


@dataclass(frozen=True, eq=False)  # holds a Prior: == would be ambiguous
class Window:
    """One monitoring window of one version's logged traffic, [start, end) in UTC, or of
    none (``version`` None, counts 0, measures None: no traffic).

    Calibration on the labelled predictions (``mean_predicted`` against ``observed_rate``,
    ``log_loss``, ``brier``, ``ece``, with their 95% ``intervals`` when computed), the raw
    scores' shift from the version's fitting batch (``psi``, ``ks``; binary versions), and
    ``estimated`` (all the window's predictions, labelled or not) against ``realized``
    (the labelled ones) performance, and the window's ``prior`` by EM."""

    start: datetime
    end: datetime
    version: int | None
    n_predictions: int
    n_labelled: int
    mean_predicted: float | None
    observed_rate: float | None
    log_loss: float | None
    brier: float | None
    ece: float | None
    psi: float | None
    ks: float | None
    intervals: dict[str, Interval]
    estimated: Performance | None
    realized: Performance | None
    prior: Prior | None
    document: Document = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, data: Document) -> Window:
        """A window from a row of the monitoring answer's ``windows``."""
        version = data["version"]
        return cls(
            start=datetime.fromisoformat(data["start"]),
            end=datetime.fromisoformat(data["end"]),
            version=None if version is None else int(version),
            n_predictions=int(data["n_predictions"]),
            n_labelled=int(data["n_labelled"]),
            mean_predicted=_number(data.get("mean_predicted")),
            observed_rate=_number(data.get("observed_rate")),
            log_loss=_number(data.get("log_loss")),
            brier=_number(data.get("brier")),
            ece=_number(data.get("ece")),
            psi=_number(data.get("psi")),
            ks=_number(data.get("ks")),
            intervals=_intervals(data.get("intervals")),
            estimated=Performance.read(data.get("estimated")),
            realized=Performance.read(data.get("realized")),
            prior=Prior.read(data.get("prior")),
            document=data,
        )


def windows_from_json(data: Document) -> list[Window]:
    """The windows of a monitoring answer, oldest first, as the service orders them."""
    rows = data["windows"]
    if not isinstance(rows, list):
        raise TypeError(f"windows is {type(rows).__name__}, not an array")
    return [Window.from_json(row) for row in rows]
