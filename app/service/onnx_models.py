"""Stored versions as ONNX models (:mod:`app.export`), built once per version and dtype and
then kept: a version's name and number are never given out again, so its model never changes.

The version is read from the database when asked, as the JSON artifact is (an alias just
moved is followed at once), and its artifact decoded on a build; the version cache is not
used, so an export never holds a place there.
"""

from __future__ import annotations

from app import __version__, export
from app.errors import NotExportable
from app.export import Dtype
from app.service.loaded import LoadedVersion
from app.service.memo import Memo
from app.store import Database, Selector, VersionRecord

MODELS_KEPT = 16
"""Models kept in memory; each is about the size of the version's artifact (kilobytes; 32 MB for
10^6 isotonic thresholds)."""


class OnnxModels:
    """The ONNX models of stored versions."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.models: Memo[export.OnnxExport] = Memo(MODELS_KEPT)

    def kept(
        self, name: str, selector: Selector, dtype: Dtype
    ) -> tuple[VersionRecord, export.OnnxExport | None]:
        """The selected version and its model if already built (a cheap read, for the
        threadpool), else None."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
        return record, self.models.get((record.name, record.version, dtype))

    def keep(self, record: VersionRecord, dtype: Dtype, model: export.OnnxExport) -> None:
        """Keep a model built elsewhere (in a worker), for :meth:`kept`."""
        self.models.put((record.name, record.version, dtype), model)

    def model(
        self, name: str, selector: Selector, dtype: Dtype
    ) -> tuple[VersionRecord, export.OnnxExport]:
        """The selected version and its model, built if missing (CPU work: a job of the
        pool). :class:`NotExportable` when the graph would not match predict."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            key = (record.name, record.version, dtype)
            kept = self.models.get(key)
            if kept is not None:
                return record, kept
            data = repo.get_artifact(record.id)

        def build() -> export.OnnxExport:
            loaded = LoadedVersion.from_artifact(record, data)
            try:
                return export.export_onnx(
                    loaded.calibrator,
                    record.n_classes,
                    dtype=dtype,
                    metadata={
                        "calibrator": record.name,
                        "version": str(record.version),
                        "method": record.method,
                        "n_classes": str(record.n_classes),
                        "artifact_sha256": record.artifact_sha256,
                        "exported_by": f"calibration-service {__version__}",
                    },
                )
            except export.ExportError as exc:
                where = f"{record.name!r} v{record.version} ({record.method})"
                raise NotExportable(f"{where} is not exported: {exc}") from None

        return record, self.models.get_or_compute(key, build)
