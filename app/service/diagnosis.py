"""How good are a version's probabilities: reliability reports and diagrams.

The use cases behind the diagnostics and picture routes (compare: :mod:`app.service.comparison`).
Each reads what it needs in one transaction; what a stored version yields never changes (its
number is never reused), so its reports and diagrams are computed once per query and kept in
bounded memos (:mod:`app.service.memo`), with the parts its reports for other bins share
(:class:`~app.calibration.BinFree`), and its decoded fitting batch is shared by the reports
being computed. Knows no HTTP; the routes run these methods through the bounded
:class:`app.service.work.WorkPool`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from app import figures
from app.calibration import BinFree, Report, reuses_bin_free
from app.errors import NotFound, StoredDataCorrupt
from app.service.batches import Batch
from app.service.memo import Memo
from app.service.reporting import (
    DEFAULT_REPORT,
    BinFreeParts,
    Curve,
    ImageFormat,
    ReportOptions,
    labelled_reports,
)
from app.service.version_cache import VersionCache
from app.store import (
    ArtifactError,
    Database,
    Repository,
    Selector,
    StoredBatch,
    VersionRecord,
    decode_batch,
)

Key = tuple[object, ...]
BatchBytes = bytes | memoryview | None
"""A stored batch as read, None when the caller did not need to read it."""

REPORTS_KEPT = 512
"""Reliability reports kept (a few kilobytes each)."""
PARTS_KEPT = 512
"""Versions' :class:`BinFreeParts` kept (a few kilobytes each: measures and a curve)."""
PICTURES_KEPT = 128
"""Rendered diagrams kept (tens of kilobytes each)."""


@dataclass(frozen=True)
class Located:
    """The version a selector names now: its number and its rows."""

    version: int
    n_samples: int


@dataclass(frozen=True)
class BinFreeKey:
    """What names the :class:`BinFreeParts` of a version's reports for one class and number
    of resamples, whatever their bins."""

    name: str
    version: int
    class_index: int | None
    bootstrap: int


@dataclass(frozen=True)
class Reports:
    """The calibrated and raw reliability reports of one labelled batch, for one version."""

    name: str
    version: int
    method: str
    n_samples: int
    calibrated: Report
    raw: Report


class Diagnosis:
    """Reports, diagrams and comparisons of stored versions."""

    def __init__(self, database: Database, versions: VersionCache) -> None:
        self.database = database
        self.versions = versions
        self.reports: Memo[Reports] = Memo(REPORTS_KEPT)
        self.bin_free_parts: Memo[BinFreeParts] = Memo(PARTS_KEPT)
        """What a version's reports for other bins share (:meth:`bin_free`, :meth:`remember`)."""
        self.pictures: Memo[bytes] = Memo(PICTURES_KEPT)
        # Decoded batches (~250 MB for 10^7 rows) are shared while in use, never kept.
        self.batches: Memo[StoredBatch] = Memo(0, weak=True)

    # -- the version's own, out-of-fold ----------------------------------------------------
    def stored(
        self,
        name: str,
        selector: Selector,
        query: ReportOptions,
        known: BinFreeParts | None = None,
    ) -> Reports:
        """The reports of the version's cross-validated predictions on its fitting batch
        (``known``: what :meth:`bin_free` keeps of those for other bins, which they share)."""
        query = query.reported()
        record, data = self._read(name, selector, lambda r: self._known(r, query))
        return self._stored(record, query, data, known)

    @staticmethod
    def bin_free_key(name: str, version: int, query: ReportOptions) -> BinFreeKey:
        """What names the parts the reports for ``query`` share with those of other bins."""
        return BinFreeKey(name, version, query.class_index, query.bootstrap)

    @staticmethod
    def shares_bin_free(located: Located, query: ReportOptions) -> bool:
        """Whether the reports for ``query`` of the ``located`` version are made from the
        parts another's bins left (:func:`~app.calibration.reuses_bin_free`)."""
        return reuses_bin_free(located.n_samples, query.bootstrap)

    def bin_free(self, name: str, version: int, query: ReportOptions) -> BinFreeParts | None:
        """The parts kept that the reports for ``query`` share with those of other bins."""
        return self.bin_free_parts.get(self.bin_free_key(name, version, query))

    def remember(self, located: Located, name: str, query: ReportOptions, reports: Reports) -> None:
        """Keep ``reports``, made for ``query`` (in a worker, say), and the parts they share
        with the reports of other bins."""
        self.reports.put(self.key(name, located.version, query), reports)
        made = (located.n_samples, query.class_index, query.bootstrap)
        parts = BinFree.of(reports.calibrated, *made), BinFree.of(reports.raw, *made)
        self.bin_free_parts.put(self.bin_free_key(name, located.version, query), parts)

    def locate(self, name: str, selector: Selector) -> Located:
        """The version ``selector`` names now (one read: a deleted version is a 404): its
        number, what the routes key :attr:`reports` and :attr:`pictures` by (:meth:`key`)."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            return Located(record.version, record.n_samples)

    @staticmethod
    def key(name: str, version: int, query: ReportOptions, image: ImageFormat | None = None) -> Key:
        """What names :meth:`stored`'s reports, or its diagram as ``image``, forever."""
        return (name, version, query.reported()) if image is None else (name, version, query, image)

    def stored_picture(
        self,
        name: str,
        selector: Selector,
        query: ReportOptions,
        image_format: ImageFormat,
        known: BinFreeParts | None = None,
    ) -> bytes:
        """The reliability diagram of :meth:`stored`, drawn once per version and query
        (``known`` as there)."""
        full, drawn = query.reported(), query.pictured()

        def needless(record: VersionRecord) -> bool:  # the batch, for what is kept
            key = (*_key(record), query, image_format)
            kept = self.pictures.get(key) is not None or self._known(record, drawn)
            return kept or self.reports.get((*_key(record), full)) is not None

        record, data = self._read(name, selector, needless)

        def draw() -> bytes:
            # the JSON's reports when kept (they hold all a picture draws), else the cheaper ones
            kept = self.reports.get((*_key(record), full)) is not None
            reports = self._stored(record, full if kept else drawn, data, known)
            return _draw(reports, query, image_format)

        return self.pictures.get_or_compute((*_key(record), query, image_format), draw)

    def batch_unless_kept(
        self, record: VersionRecord, repo: Repository, image: ImageFormat, curve: Curve = "binned"
    ) -> BatchBytes:
        """Within the caller's snapshot: ``record``'s stored batch, unless the default
        reports and the picture of :meth:`reports_and_picture` are kept without it (None)."""
        key = _key(record)
        drawn = self.pictures.get((*key, replace(DEFAULT_REPORT, curve=curve), image))
        if drawn is not None and self._known(record, DEFAULT_REPORT.reported()):
            return None
        return None if self.batches.get(key) is not None else repo.get_batch(record.id)

    def reports_and_picture(
        self, record: VersionRecord, data: BatchBytes, image: ImageFormat, curve: Curve = "binned"
    ) -> tuple[Reports, bytes]:
        """:meth:`stored` with the default options and :meth:`stored_picture` drawing
        ``curve`` (the reports hold the smooth curve's band too), of a record (and its batch,
        from :meth:`batch_unless_kept`) the caller read in its snapshot."""
        reports = self._stored(record, DEFAULT_REPORT.reported(), data)
        drawn = replace(DEFAULT_REPORT, curve=curve)
        picture = self.pictures.get_or_compute(
            (*_key(record), drawn, image), lambda: _draw(reports, drawn, image)
        )
        return reports, picture

    def fitting_batch(self, record: VersionRecord, repo: Repository) -> StoredBatch:
        """The batch ``record``'s version was fitted on, read within ``repo``'s unit of work
        (one snapshot with the caller's reads), unless decoded right now for another."""

        def decoded() -> StoredBatch:
            return self._decoded(record, repo.get_batch(record.id))

        return self.batches.get_or_compute(_key(record), decoded)

    def _known(self, record: VersionRecord, query: ReportOptions) -> bool:
        """Whether the reports for ``query`` are kept, or the batch is decoded right now."""
        key = _key(record)
        return self.reports.get((*key, query)) is not None or self.batches.get(key) is not None

    def _read(
        self, name: str, selector: Selector, known: Callable[[VersionRecord], bool]
    ) -> tuple[VersionRecord, BatchBytes]:
        """The version's record and, unless what is asked is ``known`` without it, its stored
        batch: one snapshot."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            return record, None if known(record) else repo.get_batch(record.id)

    def _stored(
        self,
        record: VersionRecord,
        query: ReportOptions,
        data: BatchBytes,
        known: BinFreeParts | None = None,
    ) -> Reports:
        # parts of other resamples (a picture without bands draws none) serve nothing here
        same = known is not None and known[0].resamples == query.bootstrap

        def compute() -> Reports:
            stored = self.batches.get_or_compute(_key(record), lambda: self._decoded(record, data))
            calibrated, raw = labelled_reports(
                stored.out_of_fold,
                stored.scores,
                stored.labels,
                stored.weights,
                query,
                known if same else None,
            )
            return Reports(
                record.name, record.version, record.method, record.n_samples, calibrated, raw
            )

        return self.reports.get_or_compute((*_key(record), query), compute)

    def _decoded(self, record: VersionRecord, data: BatchBytes) -> StoredBatch:
        if data is None:  # kept or shared a moment ago, gone since: read it again
            with self.database.transaction() as repo:
                # By number, then by row: SQLite gives a deleted version's row id to the next.
                if repo.get_version(record.name, record.version).id != record.id:
                    raise NotFound(f"{record.name!r} v{record.version} was deleted meanwhile")
                data = repo.get_batch(record.id)
        try:
            return decode_batch(data)
        except ArtifactError as exc:
            raise StoredDataCorrupt(
                f"the stored batch of {record.name!r} v{record.version} cannot be read: {exc}"
            ) from None

    # -- a fresh labelled batch --------------------------------------------------------------
    def on_batch(
        self, name: str, selector: Selector, batch: Batch, query: ReportOptions
    ) -> Reports:
        """The same reports on a fresh labelled batch; nothing is stored or kept."""
        loaded = self.versions.resolve(name, selector)
        probabilities = loaded.checked_predict(batch.scores)
        calibrated, raw = labelled_reports(
            probabilities, batch.scores, batch.labels, batch.weights, query
        )
        return Reports(name, loaded.version, loaded.method, batch.n_samples, calibrated, raw)

    def batch_picture(
        self,
        name: str,
        selector: Selector,
        batch: Batch,
        query: ReportOptions,
        image_format: ImageFormat,
    ) -> bytes:
        """The diagram of :meth:`on_batch`; drawn for this request only."""
        reports = self.on_batch(name, selector, batch, query.pictured())
        return _draw(reports, query, image_format)


def _key(record: VersionRecord) -> tuple[str, int]:
    """What names a stored version's content forever: its name and number, never given out
    again (a row id is not: SQLite hands a deleted row's id to the next insert)."""
    return record.name, record.version


def _draw(reports: Reports, query: ReportOptions, image_format: ImageFormat) -> bytes:
    which = "" if query.class_index is None else f" · class {query.class_index}"
    title = f"{reports.name} v{reports.version} · {reports.method} · n = {reports.n_samples}"
    return figures.render_reliability_diagram(
        reports.calibrated,
        reports.raw,
        title=title + which,
        image_format=image_format,
        curve=query.curve,
    )
