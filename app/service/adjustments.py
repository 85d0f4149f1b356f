"""Label shift, corrected: a new version whose probabilities are a stored version's corrected
to new class priors by Bayes' rule (``service.adjustments.adjust``).

Under label shift the class shares move while p(score | class) stays, so a calibrated
version's probabilities under new priors pi' are its own times pi'_c / pi_c, renormalised
(Saerens, Latinne & Decaestecker 2002; :func:`~app.calibration.adjust`), with pi the priors
it computes under (:func:`~app.service.estimates.version_priors`: its fitting batch's weighted
class shares, or for an adjusted version the priors it was adjusted to, so that adjusting
again composes). Nothing is refitted; the new version is stored as completely as a fit's:

- its artifact is the parent's state and one more Bayes step
  (:class:`~app.calibration.PriorAdjusted`), which predict, infer and the ONNX export apply;
- its batch is the parent's fitting batch (scores and labels) with the out-of-fold
  predictions adjusted the same way and each row's weight times pi'_c / pi_c of its class c:
  the importance weights that make the batch's class shares pi' (label shift's
  reweighting). A copy, not a reference: a version's batch is deleted with it, and the
  parent may be deleted first. Its diagnostics, decision and monitoring read it as any
  version's batch;
- its metrics are those of that batch, by the function a fit's are
  (:func:`~app.calibration.headline_resampled` with the fit's resamples): how the adjusted
  probabilities would have scored had the fitting batch had the new priors.

The batch is read in one transaction, the numbers crunched outside any, the version written
in another, as a fit's; a parent deleted meanwhile is a 404 and nothing is stored.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    PRIOR_FLOOR,
    Adjustment,
    PriorAdjusted,
    adjust,
    checkpoint,
    fit_resamples,
    headline_resampled,
    prior_ratio,
    raw_as_probabilities,
    with_intervals,
)
from app.errors import Conflict, invalid
from app.service.adjusted import adjusted_source, as_vector
from app.service.diagnosis import Diagnosis
from app.service.estimates import score_reference, version_priors
from app.service.loaded import LoadedVersion
from app.service.traffic.cases import TrafficCases, monitored_range
from app.service.version_cache import VersionCache
from app.service.views import VersionView
from app.store import Database, NewVersion, Selector, StoredBatch, encode_artifact, encode_batch

logger = logging.getLogger("app.service")

SMALLEST_PRIOR = PRIOR_FLOOR
"""The smallest class prior a version is adjusted to or from: Bayes' rule here keeps priors
above it (:func:`~app.calibration.prior_ratio`), so a smaller one would not be what is used."""


@dataclass(frozen=True)
class GivenPriors:
    """New priors as sent: ``prior``, a binary version's P(y = 1) (one value), or ``priors``,
    one per class; each inside (0, 1), summing to 1 (checked by the API)."""

    values: tuple[float, ...]
    field: str


@dataclass(frozen=True)
class TrafficPriors:
    """New priors estimated from the parent's logged traffic in [since, until) (the
    monitoring route's daily range by default)."""

    since: datetime | None
    until: datetime | None


class Adjustments:
    """Versions corrected to new class priors: ``service.adjustments.adjust``."""

    def __init__(
        self,
        database: Database,
        cache: VersionCache,
        diagnosis: Diagnosis,
        traffic: TrafficCases,
    ) -> None:
        self.database = database
        self.cache = cache
        self.diagnosis = diagnosis
        self.traffic = traffic

    def adjust(
        self,
        name: str,
        selector: Selector,
        target: GivenPriors | TrafficPriors,
        *,
        description: str = "",
        tags: Mapping[str, str] | None = None,
    ) -> VersionView:
        """Store the next version of ``name``: the version ``selector`` names corrected to
        ``target``'s priors (422 for priors that do not fit it, 409 for a version with a
        class of no weight, which no prior can move)."""
        started = time.perf_counter()
        generation = self.cache.generation(name)
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            parent = self.cache.load(record, repo, generation)
            stored = self.diagnosis.fitting_batch(record, repo)
        prior_from = version_priors(record, stored)
        if np.any(prior_from < SMALLEST_PRIOR):
            absent = int(np.argmax(prior_from < SMALLEST_PRIOR))
            raise Conflict(
                f"{name!r} v{record.version} was fitted without weight on class {absent}: "
                "Bayes' rule cannot move a prior of 0"
            )
        prior_to, estimated = self._priors_to(name, record.version, record.n_classes, target)
        step = Adjustment(prior_from, prior_to)
        calibrator = PriorAdjusted.of(parent.calibrator, step)
        state = calibrator.state()
        new = NewVersion(
            method=record.method,
            params=dict(record.params),
            n_samples=record.n_samples,
            n_positive=record.n_positive,
            n_classes=record.n_classes,
            class_counts=list(record.class_counts),
            description=description,
            tags=dict(tags or {}),
            selection=None,
            artifact=encode_artifact(record.method, dict(record.params), state),
            source=adjusted_source(record.version, prior_from, prior_to, estimated),
            **_reweighted(stored, step),
        )
        checkpoint()  # the last place a job over its budget, or unwanted, stops: nothing stored
        new = self.database.offloaded(new)  # object storage's upload, before the row
        with self.database.transaction(write=True) as repo:
            adjusted = repo.derive_version(record, new)
        self.database.kept(new)
        self.cache.fitted(LoadedVersion.of(adjusted, calibrator, state), generation)
        logger.info("adjusted %s v%d to new priors as v%d", name, record.version, adjusted.version)
        return VersionView(adjusted, state, seconds=time.perf_counter() - started)

    def _priors_to(
        self, name: str, version: int, k: int, target: GivenPriors | TrafficPriors
    ) -> tuple[NDArray[np.float64], dict[str, Any] | None]:
        """The new priors as a k-vector, and where they were estimated (None: given)."""
        if isinstance(target, GivenPriors):
            return _given(target, version, k), None
        since, until = monitored_range("1d", target.since, target.until)
        found = self.traffic.prior_estimate(name, version, since, until)
        if not found["n_predictions"] or found["estimated"] is None:
            raise invalid(
                ("prior",),
                f'is "traffic" but v{version} answered no prediction logged in '
                f"[{since.isoformat()}, {until.isoformat()})",
            )
        estimated = np.asarray(found["estimated"], dtype=np.float64)
        priors = as_vector(float(estimated[1])) if k == 2 else estimated / estimated.sum()
        _check_smallest(priors, "prior", estimated=True)
        interval = found["interval"]
        return priors, {
            "since": since,
            "until": until,
            "n_predictions": int(found["n_predictions"]),
            "interval": None  # past the classes an interval is computed for
            if interval is None
            else list(interval[1])
            if k == 2
            else [list(band) for band in interval],
        }


def _given(target: GivenPriors, version: int, k: int) -> NDArray[np.float64]:
    """The priors sent as a k-vector (binary: (1 - p, p) of P(y = 1)), divided by their sum."""
    values = np.asarray(target.values, dtype=np.float64)
    if values.size == 1 and k > 2:
        raise invalid(
            (target.field,),
            f"is one number but v{version} calibrates {k} classes: send priors, one per class",
        )
    if values.size > 1 and values.size != k:
        raise invalid(
            (target.field,), f"has {values.size} entries but v{version} calibrates {k} classes"
        )
    if values.size == 1:
        priors = as_vector(float(values[0]))
    else:  # divided by their sum, which the API holds within 1e-9 of 1
        priors = as_vector(float(values[1] / values.sum())) if k == 2 else values / values.sum()
    _check_smallest(priors, target.field, estimated=False)
    return priors


def _check_smallest(priors: NDArray[np.float64], field: str, estimated: bool) -> None:
    """422 for a class prior under :data:`SMALLEST_PRIOR`, naming the class."""
    if np.all(priors >= SMALLEST_PRIOR):
        return
    c = int(np.argmax(priors < SMALLEST_PRIOR))
    where: tuple[str | int, ...] = (field,) if field == "prior" else (field, c)
    given = f"puts class {c} at {priors[c]:.6g}"
    raise invalid(
        where,
        (f'is "traffic", whose estimate {given}' if estimated else given)
        + f", under {SMALLEST_PRIOR:g}, the smallest prior Bayes' rule is applied with",
    )


def _reweighted(stored: StoredBatch, step: Adjustment) -> dict[str, Any]:
    """The new version's ``batch`` and ``metrics``: the parent's fitting batch with its
    out-of-fold predictions adjusted by ``step`` and each row's weight times the ratio of its
    class's priors, and the headline measures of the adjusted predictions and of the raw
    scores on it, with intervals, as a fit measures its batch."""
    labels = np.asarray(stored.labels, dtype=np.int64)
    k = stored.out_of_fold.shape[1] if stored.out_of_fold.ndim == 2 else 2
    ratio = prior_ratio(step.prior_from, step.prior_to, k)
    weights = np.asarray(stored.weights, dtype=np.float64) * ratio[labels]
    out_of_fold = adjust(stored.out_of_fold, step.prior_from, step.prior_to)
    raw = raw_as_probabilities(np.asarray(stored.scores, dtype=np.float64))
    (cv, raw_metrics), (cv_resampled, raw_resampled) = headline_resampled(
        [out_of_fold, raw], labels, weights, fit_resamples(labels.size)
    )
    return {
        "metrics": {
            "cv": with_intervals(cv, cv_resampled),
            "raw": with_intervals(raw_metrics, raw_resampled),
        },
        "batch": encode_batch(stored.scores, labels, weights, out_of_fold),
        "score_reference": score_reference(stored.scores, labels, weights),
    }
