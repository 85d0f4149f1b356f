"""Decisions before the labels come: what a version's probabilities of an unlabelled batch say
about its performance and its class priors, and the threshold its costs call for
(``service.estimates.<verb>``).

The measures are :mod:`app.calibration`'s: CBPE's expected performance with its sampling
bands (:func:`~app.calibration.expected_binary`), and Saerens et al.'s EM estimate of the
batch's priors with the likelihood's interval, beside the version's training priors, the
class shares of its fitting batch, weighted as it was fitted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    DEFAULT_THRESHOLD,
    NORMAL_95,
    PRIOR_FLOOR,
    Costs,
    ScoreReference,
    decide,
    em_priors,
    expected_binary,
    expected_multiclass,
    prior_intervals,
)
from app.errors import invalid
from app.service.adjusted import adjusted_to
from app.service.diagnosis import Diagnosis
from app.service.memo import Memo
from app.service.serving import Serving
from app.store import Database, Selector, StoredBatch, VersionRecord

Band = tuple[float, float]
PRIORS_KEPT = 1024
"""Training priors kept per process: a few floats each, read once per version."""


@dataclass(frozen=True)
class Decision:
    """The Bayes-optimal threshold of a version's costs and what deciding at it cost on the
    version's out-of-fold predictions, beside deciding at 0.5."""

    name: str
    version: int
    threshold: float
    cost: float
    interval: tuple[float, float]
    cost_at_half: float
    interval_at_half: tuple[float, float]


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
        self._priors: Memo[NDArray[np.float64]] = Memo(PRIORS_KEPT)

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

    def decision(self, name: str, selector: Selector, costs: Costs) -> Decision:
        """The threshold ``costs`` call for (Elkan's, for calibrated probabilities), and the
        mean cost per case of deciding at it, and at 0.5, on the version's out-of-fold
        predictions and their labels (weighted as fitted), each with a 95% normal interval of
        a weighted mean (422 for a multiclass version: its decision is the argmax)."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            if record.n_classes != 2:
                raise invalid(("selector",), "is a multiclass version: it decides by argmax")
            stored = self.diagnosis.fitting_batch(record, repo)
        p = np.asarray(stored.out_of_fold, dtype=np.float64)
        y = np.asarray(stored.labels, dtype=np.float64)
        w = np.asarray(stored.weights, dtype=np.float64)
        t = costs.threshold
        cost, interval = _mean_cost(costs.per_case(decide(p, t), y), w)
        half, half_interval = _mean_cost(costs.per_case(decide(p, DEFAULT_THRESHOLD), y), w)
        return Decision(name, record.version, t, cost, interval, half, half_interval)

    def training_priors(self, name: str, version: int) -> NDArray[np.float64]:
        """The class shares of the version's fitting batch, weighted: sum of the weights of
        each label over all the weights (kept per version: a name and number never denote
        another fit)."""

        def compute() -> NDArray[np.float64]:
            with self.database.transaction() as repo:
                record = repo.get_version(name, version)
                return version_priors(record, self.diagnosis.fitting_batch(record, repo))

        return self._priors.get_or_compute((name, version), compute)


COST_TAGS = {
    "cost_fp": "false_positive",
    "cost_fn": "false_negative",
    "benefit_tp": "true_positive",
    "benefit_tn": "true_negative",
}
"""The version tags that configure its costs, as ``GET …/decision``'s query names them."""


MAX_COST = 1e12
"""The largest cost or benefit taken (``GET …/decision``'s query, a version's tags): past it
the threshold's arithmetic loses its digits."""


DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A cost as a tag may write it: a decimal number in ASCII digits."""


def tagged_costs(tags: dict[str, str]) -> Costs | None:
    """The costs a version's tags configure (``cost_fp`` and ``cost_fn``, optionally
    ``benefit_tp`` and ``benefit_tn``); None when it configures none or they do not read
    as costs (the web view then shows no decision table)."""
    if "cost_fp" not in tags and "cost_fn" not in tags:
        return None
    texts = {field: tags[tag].strip() for tag, field in COST_TAGS.items() if tag in tags}
    if not all(DECIMAL.fullmatch(text) for text in texts.values()):
        return None  # as a query reads a number: no "1_000", no other scripts' digits
    given = {field: float(text) for field, text in texts.items()}
    if any(value > MAX_COST for value in given.values()):
        return None
    try:
        return Costs(**given)
    except ValueError:
        return None


def version_priors(record: VersionRecord, stored: StoredBatch) -> NDArray[np.float64]:
    """The priors a version's probabilities are computed under: the class shares of its
    fitting batch, weighted (the sum of the weights of each label over all the weights); for
    a version adjusted to new priors (:mod:`app.service.adjustments`), those it was adjusted
    to, as its Bayes step used them."""
    adjusted = adjusted_to(record)
    if adjusted is not None:
        return adjusted
    weights = np.asarray(stored.weights, dtype=np.float64)
    shares = np.bincount(stored.labels, weights=weights, minlength=record.n_classes)
    priors: NDArray[np.float64] = shares / shares.sum()
    return priors


def _mean_cost(per_case: NDArray[np.float64], w: NDArray[np.float64]) -> tuple[float, Band]:
    """The weighted mean cost and its 95% normal interval (the weighted mean's standard
    error, sum w^2 (c - mean)^2 / (sum w)^2), kept within the costs a case can have."""
    total = float(w.sum())
    mean = float(w @ per_case) / total
    error = float(np.sqrt((w**2) @ (per_case - mean) ** 2)) / total
    low, high = float(per_case.min()), float(per_case.max())
    return mean, (max(low, mean - NORMAL_95 * error), min(high, mean + NORMAL_95 * error))


def prior_of(
    p: NDArray[np.float64],
    training: NDArray[np.float64],
    weights: NDArray[np.float64] | None = None,
    *,
    sampled: bool = False,
) -> dict[str, Any]:
    """``{"training", "estimated", "interval"}``: the positive class's for a binary batch,
    vectors for k classes; the estimate None for an empty batch, or for a version with a
    training prior under :data:`~app.calibration.PRIOR_FLOOR`. ``weights``: how many rows
    each row of ``p`` stands for, observed or (``sampled``) not
    (:func:`~app.calibration.prior_intervals`)."""
    if p.shape[0] == 0 or np.any(training < PRIOR_FLOOR):
        # no batch, or a class the version was fitted without: no prior can move it, and EM
        # would divide by a prior of ~0 (adjust refuses such a version, 409)
        estimated: Any = None
        interval: Any = None
    else:
        found, _ = em_priors(p, training, weights)
        bands = prior_intervals(p, training, found, weights, sampled=sampled)
        estimated = found.tolist()
        interval = None if bands is None else [list(band) for band in bands]
    if p.ndim == 1:
        return {
            "training": float(training[1]),
            "estimated": None if estimated is None else estimated[1],
            "interval": None if interval is None else interval[1],
        }
    return {"training": training.tolist(), "estimated": estimated, "interval": interval}


def score_reference(
    scores: NDArray[np.float64], labels: NDArray[np.int64], weights: NDArray[np.float64]
) -> bytes | None:
    """A binary fitting batch's score bins, which monitoring counts its traffic's raw scores
    in, and its class shares (:class:`~app.calibration.ScoreReference`); None for a k-class
    batch (rows of scores)."""
    if np.ndim(scores) != 1:
        return None
    w = np.asarray(weights, dtype=np.float64)
    return ScoreReference.of_batch(np.asarray(scores), np.asarray(labels), w).to_bytes()
