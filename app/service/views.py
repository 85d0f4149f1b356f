"""What the service's use cases answer: records with what the API shows beside them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from app.store import CalibratorSummary, VersionRecord


@dataclass(frozen=True)
class VersionView:
    """A stored version with its readable fitted numbers; a fit's own view also says which
    method was asked for (``auto`` is ``auto``) and how long fitting and storing took, for the
    metrics of the process that asked (:meth:`app.service.versions.Versions.remember`)."""

    record: VersionRecord
    fitted: dict[str, Any]
    asked: str | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class CalibratorView:
    """A calibrator, one page of its versions (of ``total``), and its aliases."""

    summary: CalibratorSummary
    versions: list[VersionRecord]
    total: int
    aliases: dict[str, int]


class Prediction(NamedTuple):  # a tuple: built on every predict, 3x faster than frozen
    """Calibrated probabilities from one version, and their intervals when asked."""

    name: str
    version: int
    probabilities: NDArray[np.float64]
    intervals: NDArray[np.float64] | None = None
    logged: int | None = None
    """With ids: how many of the predictions the traffic log took (the rest were dropped)."""
