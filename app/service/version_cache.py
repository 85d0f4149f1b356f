"""Selectors to loaded calibrators, reading the database as rarely as the contract allows.

One module owns both what is cached and when it may be served. A selector (a version
number, ``latest`` or an alias) resolves to a version number through a *label*, and a
number to a decoded calibrator through an *entry*; each remembers when the database last
confirmed it. The freshness contract of docs/api.md (Predicting): a new version is served as
``latest`` by every replica within ``window`` seconds of its fit answering 201; a deleted version, a
moved alias, stop being served as fast.

- **Fresh** (confirmed less than half a window ago): served as is.
- **Stale-while-revalidate** (half a window to a window): served, while one background read
  per key re-confirms it, so steady traffic never waits on the database.
- **Expired** (a window or more): not served; :meth:`VersionCache.resolve` reads the
  database. Except while the database is unavailable (or slow to re-confirm): a pinned
  version already loaded keeps being served, since versions never change (only a deletion
  through another replica would be missed until it returns); ``latest`` and aliases may have
  moved, so those answer 503.

The clock and the way a re-confirmation is scheduled are injectable, so the policy is
tested step by step without sleeping.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from app.errors import DatabaseUnavailable, NotFound
from app.observability import record_artifact_cache
from app.service.loaded import LoadedVersion
from app.store import (
    Database,
    Repository,
    Selector,
    VersionRecord,
)

logger = logging.getLogger("app.version_cache")


Schedule = Callable[[Callable[[], None]], None]
"""Runs a re-confirmation, later and elsewhere (by default on one background thread)."""

CAPACITY = 256
"""Loaded versions kept (least recently used first out)."""


class VersionCache:
    """Labels and loaded versions, with the freshness policy above."""

    def __init__(
        self,
        database: Database,
        window: float,
        *,
        capacity: int = CAPACITY,
        clock: Callable[[], float] = time.monotonic,
        schedule: Schedule | None = None,
    ) -> None:
        self.database = database
        self.window = window
        self._capacity = capacity
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, int], tuple[LoadedVersion, float]] = OrderedDict()
        self._labels: dict[tuple[str, str], tuple[int, float]] = {}
        self._generations: dict[str, int] = {}
        self._pending: set[tuple[str, Selector]] = set()
        self._executor: ThreadPoolExecutor | None = None
        if schedule is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="revalidate")
            executor = self._executor

            def schedule(task: Callable[[], None]) -> None:
                executor.submit(task)

        self._schedule = schedule

    # -- serving -----------------------------------------------------------------------------
    def cached(self, name: str, selector: Selector) -> LoadedVersion | None:
        """The loaded calibrator if it may be served without waiting for the database,
        else None (the caller then takes :meth:`resolve`)."""
        if isinstance(selector, str):
            label = self._label(name, selector)
            if label is None or label[1] >= self.window:
                return None
            number = label[0]
            if label[1] >= self.window / 2:
                self._revalidate(name, selector)
        else:
            number = selector
        entry = self._entry(name, number)
        if entry is None:
            return None
        loaded, age = entry
        if age >= self.window:
            if isinstance(selector, str) or not self._in_doubt(name, number):
                return None
            self._revalidate(name, number)
            return loaded
        if age >= self.window / 2:
            self._revalidate(name, number)
        record_artifact_cache(hit=True)
        return loaded

    def resolve(self, name: str, selector: Selector) -> LoadedVersion:
        """The loaded calibrator for a selector, reading the database at most once a window
        (and then in one transaction: the number, the record and, if new, the artifact)."""
        found = self.cached(name, selector)
        if found is not None:
            return found
        generation = self.generation(name)
        entry = self._entry(name, selector) if isinstance(selector, int) else None
        try:
            with self.database.transaction() as repo:
                number = selector if isinstance(selector, int) else _number(repo, name, selector)
                record = repo.get_version(name, number)
                loaded = self.load(record, repo, generation)
        except DatabaseUnavailable:
            if entry is None:
                raise
            logger.info("serving %s v%d as loaded: the database is unavailable", name, selector)
            return entry[0]
        if isinstance(selector, str):
            self._remember(name, selector, number, generation)
        return loaded

    def load(self, record: VersionRecord, repo: Repository, generation: int) -> LoadedVersion:
        """The version's calibrator: the entry (now re-confirmed) or decoded from its artifact,
        read in the caller's transaction. ``generation``, taken before the caller's reads,
        keeps a version deleted meanwhile out of the cache (see :meth:`generation`)."""
        entry = self._entry(record.name, record.version)
        if entry is not None and entry[0].version_id == record.id:
            self.put(entry[0], generation)
            record_artifact_cache(hit=True)
            return entry[0]
        record_artifact_cache(hit=False)
        loaded = LoadedVersion.from_artifact(record, repo.get_artifact(record.id))
        self.put(loaded, generation)
        return loaded

    # -- what this process changed -------------------------------------------------------------
    def generation(self, name: str) -> int:
        """How many times ``name``'s cache was cleared (by a delete, here): take it before
        reading the database, pass it to the write that follows, and the write is dropped if
        a delete came in between, so what the delete removed never comes back."""
        with self._lock:
            return self._generations.get(name, 0)

    def fitted(self, loaded: LoadedVersion, generation: int) -> None:
        """A version this process just stored: loaded, and ``latest`` unless a later fit's
        version already is (fits may answer out of order)."""
        self.put(loaded, generation)
        label = self._label(loaded.name, "latest")
        if label is None or label[0] < loaded.version:
            self._remember(loaded.name, "latest", loaded.version, generation)

    def aliased(self, name: str, alias: str, version: int, generation: int) -> None:
        """An alias this process just moved."""
        self._remember(name, alias, version, generation)

    def put(self, loaded: LoadedVersion, generation: int) -> None:
        """Keep ``loaded`` (confirmed now), unless ``name`` was cleared since ``generation``."""
        with self._lock:
            if self._generations.get(loaded.name, 0) != generation:
                return
            key = (loaded.name, loaded.version)
            self._entries[key] = (loaded, self._clock())
            self._entries.move_to_end(key)
            while len(self._entries) > self._capacity:
                self._entries.popitem(last=False)

    def forget(self, name: str, version: int | None = None) -> None:
        """Drop one version of ``name`` (or all of them) and its labels (``latest``, aliases),
        and start a new generation: writes based on earlier reads are dropped."""
        with self._lock:
            self._generations[name] = self._generations.get(name, 0) + 1
            for label in [key for key in self._labels if key[0] == name]:
                del self._labels[label]
            for key in [k for k in self._entries if k[0] == name and version in (None, k[1])]:
                del self._entries[key]

    def close(self) -> None:
        """Stop the background re-confirmations (at shutdown)."""
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    # -- the policy's parts ------------------------------------------------------------------
    def _label(self, name: str, label: str) -> tuple[int, float] | None:
        with self._lock:
            hit = self._labels.get((name, label))
        return None if hit is None else (hit[0], self._clock() - hit[1])

    def _entry(self, name: str, version: int) -> tuple[LoadedVersion, float] | None:
        with self._lock:
            entry = self._entries.get((name, version))
            if entry is None:
                return None
            self._entries.move_to_end((name, version))
        return entry[0], self._clock() - entry[1]

    def _remember(self, name: str, label: str, version: int, generation: int) -> None:
        with self._lock:
            if self._generations.get(name, 0) == generation:
                self._labels[(name, label)] = (version, self._clock())

    def _in_doubt(self, name: str, number: int) -> bool:
        """Whether the database is failing, or still re-confirming this version."""
        if self.database.unavailable:
            return True
        with self._lock:
            return (name, number) in self._pending

    def _revalidate(self, name: str, selector: Selector) -> None:
        key = (name, selector)
        with self._lock:
            if key in self._pending:
                return
            self._pending.add(key)
        try:
            self._schedule(lambda: self._reconfirm(name, selector))
        except RuntimeError:  # shutting down
            with self._lock:
                self._pending.discard(key)

    def _reconfirm(self, name: str, selector: Selector) -> None:
        """One database read that restarts (or ends) a label's or an entry's window."""
        generation = self.generation(name)
        try:
            with self.database.transaction() as repo:
                if isinstance(selector, str):
                    self._remember(name, selector, _number(repo, name, selector), generation)
                    return
                record = repo.get_version(name, selector)
            entry = self._entry(name, selector)
            if entry is not None and entry[0].version_id == record.id:
                self.put(entry[0], generation)
            else:
                self.forget(name, selector)
        except NotFound:
            self.forget(name, selector if isinstance(selector, int) else None)
        except DatabaseUnavailable:
            logger.warning("could not re-confirm %s %s: database unavailable", name, selector)
        except Exception:
            logger.exception("could not re-confirm %s %s", name, selector)
        finally:
            with self._lock:
                self._pending.discard((name, selector))


def _number(repo: Repository, name: str, selector: str) -> int:
    """The version ``latest`` or an alias of ``name`` denotes now."""
    if selector == "latest":
        return repo.latest_version_number(name)
    return repo.get_version(name, selector).version
