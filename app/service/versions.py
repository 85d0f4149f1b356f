"""A calibrator's versions: fit one (from a posted batch or from the logged traffic), read,
describe, alias, export and delete them.

The CPU-heavy work (fitting, cross-validation, the bootstrap) happens before the short
database transaction that writes a version, so a version is written completely or not at all
and no lock is held while numbers are crunched.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np

from app.calibration import (
    CalibrationError,
    HeadlineReports,
    Progress,
    checkpoint,
    fit_checked_batch,
    fit_resamples,
    raw_as_probabilities,
    with_intervals,
)
from app.errors import FitUnderWay, invalid
from app.observability import record_fit
from app.service.batches import Batch, check_method_fits_batch
from app.service.estimates import score_reference
from app.service.fit_keys import LOST_CLAIM, Claim
from app.service.loaded import LoadedVersion
from app.service.traffic.refit import traffic_batch
from app.service.version_cache import VersionCache
from app.service.views import VersionView
from app.settings import Settings
from app.store import (
    Database,
    NewVersion,
    Selector,
    VersionRecord,
    encode_artifact,
    encode_batch,
)

logger = logging.getLogger("app.service")


class Versions:
    """The use cases of one calibrator's versions: ``service.versions.<verb>``."""

    def __init__(self, database: Database, settings: Settings, cache: VersionCache) -> None:
        self.database = database
        self.settings = settings
        self.cache = cache
        # Alias moves of this process one at a time, each with its cache write: they commit in
        # the database's order anyway (the calibrator's row lock), and two moves whose commits
        # and cache writes interleaved would leave the first one's version cached.
        self._moving = threading.Lock()

    def fit(
        self,
        name: str,
        batch: Batch,
        *,
        method: str,
        params: Mapping[str, object],
        description: str = "",
        tags: Mapping[str, str] | None = None,
        source: Mapping[str, Any] | None = None,
        claim: Claim | None = None,
    ) -> VersionView:
        """Fit ``method`` on the batch, cross-validate it, and store the next version (with
        ``source``, the lineage of a batch read from the traffic:
        :mod:`app.service.traffic.refit`), marking ``claim``'s idempotency key with it in the
        same transaction (503, nothing stored, when the claim was lost, so that the client's
        retry answers the version of the request that took it over:
        :mod:`app.service.fit_keys`)."""
        started = time.perf_counter()
        check_method_fits_batch(method, batch)
        n_jobs = (
            self.settings.cv_jobs if batch.n_samples >= self.settings.cv_parallel_min_samples else 1
        )
        resamples = fit_resamples(batch.n_samples)
        # the raw scores' report is made while the calibrator is cross-validated (a thread
        # of its own on a large batch), once its params are known good; the out-of-fold
        # predictions' while it is fitted
        with HeadlineReports(batch.labels, batch.weights, resamples) as reports:
            raw = raw_as_probabilities(batch.scores)
            progress = Progress(lambda: reports.add(raw, background=True), reports.add)
            try:
                outcome = fit_checked_batch(
                    method,
                    params,
                    batch.scores,
                    batch.labels,
                    batch.weights,
                    n_folds=self.settings.cv_folds,
                    n_jobs=n_jobs,
                    progress=progress,
                )
            except CalibrationError as exc:  # ParamError included: loc is ("params", name)
                raise invalid(exc.loc, exc.reason) from None
            (raw_metrics, cv), (raw_resampled, cv_resampled) = reports.results()
        state = outcome.calibrator.state()
        metrics = {
            "cv": with_intervals(cv, cv_resampled),
            "raw": with_intervals(raw_metrics, raw_resampled),
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
            score_reference=score_reference(batch.scores, batch.labels, batch.weights),
        )
        checkpoint()  # the last place a job over its budget, or unwanted, stops: nothing stored
        new = self.database.offloaded(new)  # object storage's upload, before the row
        generation = self.cache.generation(name)
        with self.database.transaction(write=True) as repo:
            record = repo.create_version(name, new)
            if claim is not None and not repo.complete_fit_key(
                claim.name, claim.key, claim.owner, record.version, claim.content
            ):
                raise FitUnderWay(LOST_CLAIM.format(key=claim.key))
        self.database.kept(new)
        self.cache.fitted(LoadedVersion.of(record, outcome.calibrator, state), generation)
        logger.info(
            "fitted %s v%d with %s on %d pairs",
            name,
            record.version,
            record.method,
            batch.n_samples,
        )
        return VersionView(record, state, method, time.perf_counter() - started)

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
        claim: Claim | None = None,
    ) -> VersionView:
        """Fit the next version of ``name`` on its labelled traffic in [since, until) (of the
        version ``selector`` denotes, or of all), recording where the batch came from
        (:mod:`app.service.traffic.refit`): read in one transaction, fitted outside any, stored in
        another, as every fit is."""
        read = traffic_batch(
            self.database, name, since, until, selector, max_rows=self.settings.max_batch_rows
        )
        return self.fit(
            name,
            read.batch,
            method=method,
            params=params,
            description=description,
            tags=tags,
            source=read.source,
            claim=claim,
        )

    def generation(self, name: str) -> int:
        """Take before a fit runs elsewhere, for :meth:`remember` (see
        :meth:`~app.service.version_cache.VersionCache.generation`)."""
        return self.cache.generation(name)

    def remember(self, view: VersionView, generation: int) -> None:
        """A version :meth:`fit` stored, maybe in a worker process: loaded into this process's
        cache and served as ``latest`` (unless a later fit's version is, or ``name`` was
        deleted since ``generation``), and counted in this process's metrics."""
        self.cache.fitted(LoadedVersion.of_state(view.record, view.fitted), generation)
        if view.asked is not None and view.seconds is not None:
            record_fit(view.asked, view.seconds)

    def get(self, name: str, selector: Selector) -> VersionView:
        """A version with its fitted numbers (decoded once, then cached)."""
        generation = self.cache.generation(name)
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            loaded = self.cache.load(record, repo, generation)
        return VersionView(record=record, fitted=loaded.state)

    def delete(self, name: str, version: int, *, force: bool = False) -> None:
        """Delete a version (409 while an alias points to it, unless ``force``)."""
        with self.database.transaction(write=True) as repo:
            repo.delete_version(name, version, force=force)
        self.cache.forget(name, version)

    def update(
        self,
        name: str,
        selector: Selector,
        *,
        description: str | None,
        tags: Mapping[str, str | None] | None,
    ) -> VersionView:
        """New description and merged tags; the fitted numbers never change."""
        generation = self.cache.generation(name)
        with self.database.transaction(write=True) as repo:
            record = repo.update_version(name, selector, description=description, tags=tags)
            loaded = self.cache.load(record, repo, generation)
        return VersionView(record=record, fitted=loaded.state)

    def set_alias(self, name: str, alias: str, version: int) -> VersionView:
        """Point ``alias`` at ``version`` (creating or moving it) and return that version."""
        with self._moving:
            generation = self.cache.generation(name)
            with self.database.transaction(write=True) as repo:
                repo.set_alias(name, alias, version)
                record = repo.get_version(name, version)
                loaded = self.cache.load(record, repo, generation)
            self.cache.aliased(name, alias, version, generation)
        return VersionView(record=record, fitted=loaded.state)

    def delete_alias(self, name: str, alias: str) -> None:
        """Remove an alias; the version it pointed to stays."""
        with self._moving:
            with self.database.transaction(write=True) as repo:
                repo.delete_alias(name, alias)
            self.cache.forget(name)

    def artifact(self, name: str, selector: Selector) -> tuple[VersionRecord, bytes]:
        """The stored artifact document of a version, byte for byte."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            return record, repo.get_artifact(record.id)
