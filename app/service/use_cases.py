"""Every use case of the service, by family: ``service.<part>.<verb>``.

:class:`CalibrationService` builds the parts once per process and shares what they share (the
database, the version cache, the bounded pool of heavy work). None of them knows HTTP: each
method returns domain data or raises an :mod:`app.errors` exception.
"""

from __future__ import annotations

from datetime import timedelta

from app.service.adjustments import Adjustments
from app.service.browsing import Browsing
from app.service.calibrators import Calibrators
from app.service.comparison import Comparison
from app.service.diagnosis import Diagnosis
from app.service.estimates import Estimates
from app.service.fit_keys import FitKeys
from app.service.live_view import LiveView
from app.service.onnx_models import OnnxModels
from app.service.serving import Serving
from app.service.traffic.cases import TrafficCases
from app.service.traffic.log import TrafficLog
from app.service.verdicts import Verdicts
from app.service.version_cache import VersionCache
from app.service.versions import Versions
from app.service.work import WorkPool
from app.settings import Settings
from app.store import (
    Database,
)


class CalibrationService:
    """The parts: ``versions``, ``fit_keys`` (idempotent fits), ``calibrators``, ``serving``,
    ``diagnosis``, ``estimates`` (before the labels), ``adjustments`` (to new priors),
    ``comparison``, ``traffic`` (outcomes and monitoring), ``browsing`` and ``live_view`` (the
    web view's reads),
    ``verdicts`` (the web view's compare without a batch), ``onnx_models``;
    and what they stand on: the ``version_cache``, the ``prediction_log`` and the ``work`` pool."""

    def __init__(self, database: Database, settings: Settings, *, worker: bool = False) -> None:
        """``worker``: the service of a worker process (:mod:`app.service.workers`), which runs
        jobs and nothing in the background (no writer of the prediction log)."""
        self.database = database
        self.settings = settings
        self.version_cache = VersionCache(database, settings.latest_refresh_seconds)
        self.work = WorkPool(settings)
        self.prediction_log = TrafficLog(
            database,
            capacity=settings.traffic_buffer_rows,
            flush_rows=settings.traffic_flush_rows,
            flush_seconds=settings.traffic_flush_seconds,
            retention_days=settings.traffic_retention_days,
            writer=not worker,
        )
        self.versions = Versions(database, settings, self.version_cache)
        self.fit_keys = FitKeys(database, timedelta(seconds=settings.fit_key_lease_seconds))
        self.calibrators = Calibrators(database, self.version_cache)
        self.serving = Serving(self.version_cache, self.prediction_log)
        self.diagnosis = Diagnosis(database, self.version_cache)
        self.comparison = Comparison(database, self.version_cache)
        self.onnx_models = OnnxModels(database)
        self.estimates = Estimates(database, self.diagnosis, self.serving)
        self.traffic = TrafficCases(database, self.diagnosis, settings.max_batch_rows)
        self.adjustments = Adjustments(database, self.version_cache, self.diagnosis, self.traffic)
        self.browsing = Browsing(database, self.diagnosis, self.traffic)
        self.live_view = LiveView(database, self.diagnosis, self.traffic)
        self.verdicts = Verdicts(
            database, self.version_cache, self.diagnosis, settings.max_batch_rows
        )

    def ready(self) -> bool:
        """Whether every store answers (``/readyz``)."""
        return not self.unready()

    def unready(self) -> list[str]:
        """The stores that do not answer: ``database``, ``object store``."""
        failing = [] if self.database.ping() else ["database"]
        objects = self.database.objects
        return failing if objects is None or objects.ping() else [*failing, "object store"]

    def close(self) -> None:
        """Stop background work (at shutdown)."""
        self.work.close()
        self.version_cache.close()
        self.prediction_log.close()
