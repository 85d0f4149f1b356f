"""Decisions before the labels come: what a version's probabilities of an unlabelled batch say
about its performance and its class priors (``service.estimates.<verb>``).

The measures are :mod:`app.calibration`'s: CBPE's expected performance with its sampling
bands (:func:`~app.calibration.expected_binary`), and Saerens et al.'s EM estimate of the
batch's priors with the likelihood's interval, beside the version's training priors, the
class shares of its fitting batch, weighted as it was fitted.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration import em_priors, expected_binary, expected_multiclass, prior_intervals
from app.service.diagnosis import Diagnosis
from app.service.serving import Serving
from app.store import Database, Selector

PRIORS_KEPT = 1024
"""Training priors kept per process: a few floats each, read once per version."""


@dataclass(frozen=True)
class Estimate:
    """A version's estimates for one unlabelled batch."""

    name: str
    version: int
    n_predictions: int
    threshold: float | None
    estimated: dict[str, Any]
    prior: dict[str, Any]


class Estimates:
    """Expected performance and label shift of unlabelled batches."""

    def __init__(self, database: Database, diagnosis: Diagnosis, serving: Serving) -> None:
        self.database = database
        self.diagnosis = diagnosis
        self.serving = serving
        self._priors: OrderedDict[tuple[str, int, int], NDArray[np.float64]] = OrderedDict()
        self._lock = threading.Lock()

    def estimate(
        self, name: str, selector: Selector, scores: NDArray[np.float64], threshold: float
    ) -> Estimate:
        """The version's probabilities of ``scores``, and what they say: the expected
        performance at ``threshold`` (binary) and the EM estimate of the batch's priors."""
        prediction = self.serving.predict(name, selector, scores)
        p = prediction.probabilities
        training = self.training_priors(name, prediction.version)
        binary = p.ndim == 1
        estimated = expected_binary(p, threshold) if binary else expected_multiclass(p)
        return Estimate(
            name,
            prediction.version,
            int(p.shape[0]),
            threshold if binary else None,
            estimated,
            prior_of(p, training),
        )

    def training_priors(self, name: str, version: int) -> NDArray[np.float64]:
        """The class shares of the version's fitting batch, weighted: sum of the weights of
        each label over all the weights."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, version)
            key = (name, version, record.id)
            with self._lock:
                if key in self._priors:
                    self._priors.move_to_end(key)
                    return self._priors[key]
            stored = self.diagnosis.fitting_batch(record, repo)
        weights = np.asarray(stored.weights, dtype=np.float64)
        shares = np.bincount(stored.labels, weights=weights, minlength=record.n_classes)
        priors: NDArray[np.float64] = shares / shares.sum()
        with self._lock:
            self._priors[key] = priors
            while len(self._priors) > PRIORS_KEPT:
                self._priors.popitem(last=False)
        return priors


def prior_of(p: NDArray[np.float64], training: NDArray[np.float64]) -> dict[str, Any]:
    """``{"training", "estimated", "interval"}``: the positive class's for a binary batch,
    vectors for k classes; the estimate None for an empty batch."""
    if p.shape[0] == 0:
        estimated: Any = None
        interval: Any = None
    else:
        found, _ = em_priors(p, training)
        bands = prior_intervals(p, training, found)
        estimated, interval = found.tolist(), [list(band) for band in bands]
    if p.ndim == 1:
        return {
            "training": float(training[1]),
            "estimated": None if estimated is None else estimated[1],
            "interval": None if interval is None else interval[1],
        }
    return {"training": training.tolist(), "estimated": estimated, "interval": interval}
