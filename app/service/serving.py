"""Predicting: calibrated probabilities from a selected version, logged when given ids."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, cast, overload

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    CAPABILITIES,
    IntervalCalibrator,
)
from app.errors import invalid
from app.observability import record_predictions
from app.service.loaded import LoadedVersion
from app.service.traffic.log import TrafficLog
from app.service.version_cache import VersionCache
from app.service.views import Prediction
from app.store import (
    Selector,
)


class Serving:
    """The hot path: ``service.serving.predict``, from the version cache."""

    def __init__(self, cache: VersionCache, prediction_log: TrafficLog) -> None:
        self.cache = cache
        self.prediction_log = prediction_log

    @overload
    def predict(
        self,
        name: str,
        selector: Selector,
        scores: NDArray[np.float64],
        *,
        intervals: bool = False,
        ids: Sequence[str] | None = None,
        cached_only: Literal[False] = False,
    ) -> Prediction: ...
    @overload
    def predict(
        self,
        name: str,
        selector: Selector,
        scores: NDArray[np.float64],
        *,
        intervals: bool = False,
        ids: Sequence[str] | None = None,
        cached_only: bool,
    ) -> Prediction | None: ...
    def predict(
        self,
        name: str,
        selector: Selector,
        scores: NDArray[np.float64],
        *,
        intervals: bool = False,
        ids: Sequence[str] | None = None,
        cached_only: bool = False,
    ) -> Prediction | None:
        """Calibrated probabilities from the selected version, in input order (counted as
        served: ``calibration_predictions_total``). ``intervals`` adds each score's
        probability interval (n x 2, or n x k x 2) for methods that give one; else 422.

        With ``ids`` (one per score or row) each prediction is logged under its id
        (:class:`app.service.traffic.log.TrafficLog`). With ``cached_only``, None when the version
        cannot be served without waiting for the database (the hot path then hands the request to
        the regular route)."""
        loaded = self.cache.cached(name, selector) if cached_only else self.resolve(name, selector)
        if loaded is None:
            return None
        if intervals and not CAPABILITIES[loaded.method].intervals:
            giving = ", ".join(m for m, c in CAPABILITIES.items() if c.intervals)
            raise invalid(
                ("intervals",),
                f"is true but {name!r} v{loaded.version} uses {loaded.method}; only {giving} "
                "versions give probability intervals",
            )
        probabilities = loaded.checked_predict(scores)
        pairs = None
        if intervals:
            p0, p1 = cast(IntervalCalibrator, loaded.calibrator).predict_interval(scores)
            pairs = np.stack([p0, p1], axis=-1)
        record_predictions(loaded.method, len(scores))
        logged = None
        if ids is not None:
            logged = self.prediction_log.record(name, loaded.version, ids, scores, probabilities)
        return Prediction(name, loaded.version, probabilities, pairs, logged)

    def resolve(self, name: str, selector: Selector) -> LoadedVersion:
        """The loaded calibrator for a selector (see
        :class:`app.service.version_cache.VersionCache`)."""
        return self.cache.resolve(name, selector)
