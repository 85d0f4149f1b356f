"""Fit, serve and diagnose calibrators: joins :mod:`app.calibration` and :mod:`app.store`.

Knows no HTTP. Every public method either returns domain data or raises an
:mod:`app.errors` exception; the CPU-heavy work (fitting, cross-validation) happens before
the short database transaction that writes a version, so a version is written completely
or not at all and no lock is held while numbers are crunched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, cast, overload

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    CAPABILITIES,
    CalibrationError,
    IntervalCalibrator,
    checkpoint,
    fit_calibrator,
    fit_resamples,
    headline_resampled,
    raw_as_probabilities,
    with_intervals,
)
from app.errors import invalid, invalid_in
from app.observability import record_fit, record_predictions
from app.service.batches import Batch, check_method_fits_batch
from app.service.browsing import Browsing
from app.service.comparison import Comparison
from app.service.diagnosis import Diagnosis
from app.service.loaded import LoadedVersion
from app.service.onnx_models import OnnxModels
from app.service.traffic.cases import TrafficCases
from app.service.traffic.log import TrafficLog
from app.service.traffic.refit import traffic_batch
from app.service.version_cache import VersionCache
from app.service.views import CalibratorView, Prediction, VersionView
from app.service.work import WorkPool
from app.settings import Settings
from app.store import (
    CalibratorSummary,
    Database,
    NewVersion,
    Selector,
    VersionRecord,
    encode_artifact,
    encode_batch,
)

logger = logging.getLogger("app.service")


class CalibrationService:
    """The use cases of the HTTP API, one method each."""

    def __init__(self, database: Database, settings: Settings) -> None:
        self.database = database
        self.settings = settings
        self.versions = VersionCache(database, settings.latest_refresh_seconds)
        self.diagnosis = Diagnosis(database, self.versions)
        self.comparison = Comparison(database, self.versions)
        self.onnx_models = OnnxModels(database)
        self.work = WorkPool(
            settings.max_concurrent_fits, settings.max_queued_fits, settings.fit_timeout_seconds
        )
        self.live = TrafficCases(database, self.diagnosis, settings.max_batch_rows)
        self.traffic = TrafficLog(
            database,
            capacity=settings.traffic_buffer_rows,
            flush_rows=settings.traffic_flush_rows,
            flush_seconds=settings.traffic_flush_seconds,
            retention_days=settings.traffic_retention_days,
        )
        self.browsing = Browsing(database, self.diagnosis, self.live)

    # -- fitting -------------------------------------------------------------------------
    def fit_version(
        self,
        name: str,
        batch: Batch,
        *,
        method: str,
        params: Mapping[str, object],
        description: str = "",
        tags: Mapping[str, str] | None = None,
        source: Mapping[str, Any] | None = None,
    ) -> VersionView:
        """Fit ``method`` on the batch, cross-validate it, and store the next version (with
        ``source``, the lineage of a batch read from the traffic:
        :mod:`app.service.traffic.refit`)."""
        started = time.perf_counter()
        check_method_fits_batch(method, batch)
        n_jobs = (
            self.settings.cv_jobs if batch.n_samples >= self.settings.cv_parallel_min_samples else 1
        )
        try:
            outcome = fit_calibrator(
                method,
                params,
                batch.scores,
                batch.labels,
                batch.weights,
                n_folds=self.settings.cv_folds,
                n_jobs=n_jobs,
            )
        except CalibrationError as exc:  # ParamError included: loc is ("params", name)
            raise invalid_in("body", exc.loc, exc.reason) from None
        state = outcome.calibrator.state()
        resamples = fit_resamples(batch.n_samples)
        (cv, raw), (cv_resampled, raw_resampled) = headline_resampled(
            [outcome.out_of_fold, raw_as_probabilities(batch.scores)],
            batch.labels,
            batch.weights,
            resamples,
        )
        metrics = {
            "cv": with_intervals(cv, cv_resampled),
            "raw": with_intervals(raw, raw_resampled),
        }
        new = NewVersion(
            method=outcome.method,
            params=dict(outcome.params),
            n_samples=batch.n_samples,
            n_positive=None if batch.is_multiclass else batch.n_positive,
            n_classes=batch.n_classes,
            class_counts=np.bincount(batch.labels, minlength=batch.n_classes).tolist(),
            description=description,
            tags=dict(tags or {}),
            metrics=metrics,
            selection=outcome.selection,
            artifact=encode_artifact(outcome.method, dict(outcome.params), state),
            batch=encode_batch(batch.scores, batch.labels, batch.weights, outcome.out_of_fold),
            source=None if source is None else dict(source),
        )
        checkpoint()  # the last place a job over its budget, or unwanted, stops: nothing stored
        generation = self.versions.generation(name)
        with self.database.transaction(write=True) as repo:
            record = repo.create_version(name, new)
        self.versions.fitted(LoadedVersion.of(record, outcome.calibrator, state), generation)
        record_fit(method, time.perf_counter() - started)
        logger.info(
            "fitted %s v%d with %s on %d pairs",
            name,
            record.version,
            record.method,
            batch.n_samples,
        )
        return VersionView(record=record, fitted=state)

    def fit_from_traffic(
        self,
        name: str,
        since: datetime | None,
        until: datetime | None,
        selector: Selector | None,
        *,
        method: str,
        params: Mapping[str, object],
        description: str = "",
        tags: Mapping[str, str] | None = None,
    ) -> VersionView:
        """Fit the next version of ``name`` on its labelled traffic in [since, until) (of the
        version ``selector`` denotes, or of all), recording where the batch came from
        (:mod:`app.service.traffic.refit`): read in one transaction, fitted outside any, stored in
        another, as every fit is."""
        read = traffic_batch(
            self.database, name, since, until, selector, max_rows=self.settings.max_batch_rows
        )
        return self.fit_version(
            name,
            read.batch,
            method=method,
            params=params,
            description=description,
            tags=tags,
            source=read.source,
        )

    # -- reading -------------------------------------------------------------------------
    def get_version(self, name: str, selector: Selector) -> VersionView:
        """A version with its fitted numbers (decoded once, then cached)."""
        generation = self.versions.generation(name)
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            loaded = self.versions.load(record, repo, generation)
        return VersionView(record=record, fitted=loaded.state)

    def list_calibrators(
        self, limit: int, offset: int, tag: tuple[str, str] | None = None
    ) -> tuple[list[CalibratorSummary], int]:
        """A page of the live calibrators in name order, and how many match in all."""
        with self.database.transaction() as repo:
            return repo.list_calibrators(limit, offset, tag)

    def get_calibrator(self, name: str, limit: int, offset: int) -> CalibratorView:
        """The calibrator, a page of its versions and its aliases, from one snapshot."""
        with self.database.transaction() as repo:
            summary, versions, total = repo.get_calibrator(name, limit, offset)
            aliases = repo.calibrator_aliases(name)
        return CalibratorView(summary, versions, total, aliases)

    def delete_version(self, name: str, version: int, *, force: bool = False) -> None:
        """Delete a version (409 while an alias points to it, unless ``force``)."""
        with self.database.transaction(write=True) as repo:
            repo.delete_version(name, version, force=force)
        self.versions.forget(name, version)

    def update_version(
        self,
        name: str,
        selector: Selector,
        *,
        description: str | None,
        tags: Mapping[str, str | None] | None,
    ) -> VersionView:
        """New description and merged tags; the fitted numbers never change."""
        generation = self.versions.generation(name)
        with self.database.transaction(write=True) as repo:
            record = repo.update_version(name, selector, description=description, tags=tags)
            loaded = self.versions.load(record, repo, generation)
        return VersionView(record=record, fitted=loaded.state)

    def set_alias(self, name: str, alias: str, version: int) -> VersionView:
        """Point ``alias`` at ``version`` (creating or moving it) and return that version."""
        generation = self.versions.generation(name)
        with self.database.transaction(write=True) as repo:
            repo.set_alias(name, alias, version)
            record = repo.get_version(name, version)
            loaded = self.versions.load(record, repo, generation)
        self.versions.aliased(name, alias, version, generation)
        return VersionView(record=record, fitted=loaded.state)

    def delete_alias(self, name: str, alias: str) -> None:
        """Remove an alias; the version it pointed to stays."""
        with self.database.transaction(write=True) as repo:
            repo.delete_alias(name, alias)
        self.versions.forget(name)

    def artifact(self, name: str, selector: Selector) -> tuple[VersionRecord, bytes]:
        """The stored artifact document of a version, byte for byte."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            return record, repo.get_artifact(record.id)

    def delete_calibrator(self, name: str) -> None:
        """Delete every version of ``name``; fitting it again continues the numbering."""
        with self.database.transaction(write=True) as repo:
            repo.delete_calibrator(name)
        self.versions.forget(name)

    def ready(self) -> bool:
        """Whether the database answers (``/readyz``)."""
        return self.database.ping()

    # -- predicting ----------------------------------------------------------------------
    @overload
    def predict(
        self,
        name: str,
        selector: Selector,
        scores: NDArray[np.float64],
        *,
        intervals: tuple[str, ...] | None = None,
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
        intervals: tuple[str, ...] | None = None,
        ids: Sequence[str] | None = None,
        cached_only: bool,
    ) -> Prediction | None: ...
    def predict(
        self,
        name: str,
        selector: Selector,
        scores: NDArray[np.float64],
        *,
        intervals: tuple[str, ...] | None = None,
        ids: Sequence[str] | None = None,
        cached_only: bool = False,
    ) -> Prediction | None:
        """Calibrated probabilities from the selected version, in input order (counted as
        served: ``calibration_predictions_total``). ``intervals``, the location the client
        asked for them in (``("body", "intervals")`` or the query's), adds each score's
        probability interval (n x 2, or n x k x 2) for methods that give one; else 422.

        With ``ids`` (one per score or row) each prediction is logged under its id
        (:class:`app.service.traffic.log.TrafficLog`). With ``cached_only``, None when the version
        cannot be served without waiting for the database (the hot path then hands the request to
        the regular route)."""
        loaded = (
            self.versions.cached(name, selector) if cached_only else self.resolve(name, selector)
        )
        if loaded is None:
            return None
        if intervals is not None and not CAPABILITIES[loaded.method].intervals:
            giving = ", ".join(m for m, c in CAPABILITIES.items() if c.intervals)
            raise invalid(
                intervals,
                f"is true but {name!r} v{loaded.version} uses {loaded.method}; only {giving} "
                "versions give probability intervals",
            )
        probabilities = loaded.checked_predict(scores)
        pairs = None
        if intervals is not None:
            p0, p1 = cast(IntervalCalibrator, loaded.calibrator).predict_interval(scores)
            pairs = np.stack([p0, p1], axis=-1)
        record_predictions(loaded.method, len(scores))
        logged = None
        if ids is not None:
            logged = self.traffic.record(name, loaded.version, ids, scores, probabilities)
        return Prediction(name, loaded.version, probabilities, pairs, logged)

    def resolve(self, name: str, selector: Selector) -> LoadedVersion:
        """The loaded calibrator for a selector (see
        :class:`app.service.version_cache.VersionCache`)."""
        return self.versions.resolve(name, selector)

    def close(self) -> None:
        """Stop background work (at shutdown)."""
        self.work.close()
        self.versions.close()
        self.traffic.close()
