"""Selectors to loaded calibrators, reading the database as rarely as the contract allows.

``latest`` and aliases are resolved to version numbers, and versions to fitted calibrators
(decoded from their artifacts once), through :class:`app.predictors.LoadedVersions`. The
freshness contract of API.md: a new version is served as ``latest`` by every replica within
``latest_refresh_seconds`` of its fit answering 201; a deleted version, a moved alias, are
followed as fast.

While the database is unavailable, pinned versions already loaded keep being served (they
never change; only a deletion through another replica would be missed until it returns);
``latest`` and aliases are not served past their window, since a fit or a move elsewhere
could have changed them: those predictions answer 503.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor

from app.calibration import CalibrationError, load_calibrator
from app.errors import DatabaseUnavailable, NotFound, StoredDataCorrupt
from app.observability import record_artifact_cache
from app.predictors import LoadedVersion, LoadedVersions
from app.settings import Settings
from app.store import ArtifactError, Database, VersionRecord, decode_artifact

logger = logging.getLogger("app.resolver")

Selector = int | str
"""A version number, ``"latest"`` or an alias name."""


class VersionResolver:
    """The service's view of which calibrator a selector means, cached."""

    def __init__(self, database: Database, settings: Settings) -> None:
        self.database = database
        self.settings = settings
        self.loaded = LoadedVersions(refresh_seconds=settings.latest_refresh_seconds)
        self._revalidator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="revalidate")
        self._pending: set[tuple[str, Selector]] = set()
        self._pending_lock = threading.Lock()

    def cached(self, name: str, selector: Selector) -> LoadedVersion | None:
        """The loaded calibrator for a selector if it can be used without waiting for the
        database, else None (the caller then takes :meth:`resolve`).

        Stale-while-revalidate within the freshness window: an entry confirmed less than
        half a window ago is used as is; one between half and a whole window old is used
        while a background read re-confirms it (one at a time per key), so steady traffic
        never waits on the database and nothing is served more than a window after it
        changed; an older one is not used.
        """
        window = self.settings.latest_refresh_seconds
        if isinstance(selector, str):
            label = self.loaded.label_with_age(name, selector)
            if label is None or label[1] >= window:
                return None
            number = label[0]
            if label[1] >= window / 2:
                self._revalidate(name, selector)
        else:
            number = selector
        entry = self.loaded.entry_with_age(name, number)
        if entry is None:
            return None
        if entry[1] >= window:
            if isinstance(selector, str) or not self._database_in_doubt(name, number):
                return None
            self._revalidate(name, number)  # a pinned version, while the database is away
            return entry[0]
        if entry[1] >= window / 2:
            self._revalidate(name, number)
        record_artifact_cache(hit=True)
        return entry[0]

    def _database_in_doubt(self, name: str, number: int) -> bool:
        """Whether the database is failing, or slow to re-confirm this version.

        Pinned versions never change, so while the database cannot say whether one was
        deleted, the loaded one keeps being served (the outage contract of the service);
        ``latest`` and aliases may move, so they are not served past their window.
        """
        if self.database.unavailable:
            return True
        with self._pending_lock:
            return (name, number) in self._pending

    def _revalidate(self, name: str, selector: Selector) -> None:
        key = (name, selector)
        with self._pending_lock:
            if key in self._pending:
                return
            self._pending.add(key)
        try:
            self._revalidator.submit(self._reconfirm, name, selector)
        except RuntimeError:  # shutting down
            with self._pending_lock:
                self._pending.discard(key)

    def _reconfirm(self, name: str, selector: Selector) -> None:
        """One database read that restarts (or ends) a cached entry's freshness window."""
        try:
            with self.database.transaction() as repo:
                if isinstance(selector, str):
                    number = (
                        repo.latest_version_number(name)
                        if selector == "latest"
                        else repo.get_version(name, selector).version
                    )
                    self.loaded.remember_label(name, selector, number)
                    return
                record = repo.get_version(name, selector)
            entry = self.loaded.entry_with_age(name, selector)
            if entry is not None and entry[0].version_id == record.id:
                self.loaded.put(entry[0])
            else:
                self.loaded.forget(name, selector)
        except NotFound:
            self.loaded.forget(name, selector if isinstance(selector, int) else None)
        except DatabaseUnavailable:
            logger.warning("could not re-confirm %s %s: database unavailable", name, selector)
        except Exception:
            logger.exception("could not re-confirm %s %s", name, selector)
        finally:
            with self._pending_lock:
                self._pending.discard((name, selector))

    def close(self) -> None:
        """Stop the background re-confirmations (at shutdown)."""
        self._revalidator.shutdown(wait=True, cancel_futures=True)

    def resolve(self, name: str, selector: Selector) -> LoadedVersion:
        """The loaded calibrator for a selector, reading the database at most once a window."""
        if isinstance(selector, str):
            number = self.loaded.fresh_label(name, selector)
            if number is None:
                with self.database.transaction() as repo:
                    number = (
                        repo.latest_version_number(name)
                        if selector == "latest"
                        else repo.get_version(name, selector).version
                    )
                self.loaded.remember_label(name, selector, number)
        else:
            number = selector
        cached, fresh = self.loaded.get(name, number)
        if cached is not None and fresh:
            record_artifact_cache(hit=True)
            return cached
        try:
            with self.database.transaction() as repo:
                record = repo.get_version(name, number)
        except DatabaseUnavailable:
            if cached is None or isinstance(selector, str):
                raise
            logger.info("serving %s v%d as loaded: the database is unavailable", name, number)
            return cached
        if cached is not None and cached.version_id == record.id:
            self.loaded.put(cached)  # re-confirmed: restart its window
            record_artifact_cache(hit=True)
            return cached
        return self.load(record)

    def load(self, record: VersionRecord) -> LoadedVersion:
        """The version's calibrator, from the cache or decoded from its artifact."""
        cached, _ = self.loaded.get(record.name, record.version)
        if cached is not None and cached.version_id == record.id:
            record_artifact_cache(hit=True)
            return cached
        record_artifact_cache(hit=False)
        with self.database.transaction() as repo:
            artifact_bytes = repo.get_artifact(record.id)
        try:
            artifact = decode_artifact(artifact_bytes, record.artifact_sha256)
            calibrator = load_calibrator(
                artifact.method, artifact.params, artifact.state, n_classes=record.n_classes
            )
        except (ArtifactError, CalibrationError) as exc:
            raise StoredDataCorrupt(
                f"the artifact of {record.name!r} v{record.version} cannot be loaded: {exc}"
            ) from None
        loaded = LoadedVersion(
            record.id,
            record.name,
            record.version,
            artifact.method,
            record.n_classes,
            calibrator,
            dict(artifact.state),
        )
        self.loaded.put(loaded)
        return loaded
