"""Stored versions exported as ONNX models (:mod:`app.export`), built once per version and
dtype and then kept: a version's name and number are never given out again, so its export
never changes."""

from __future__ import annotations

from importlib.metadata import version as package_version

from app.export import Dtype, OnnxExport, export_onnx
from app.loaded import LoadedVersion
from app.memo import Memo
from app.store import Database, Selector, VersionRecord

EXPORTS_KEPT = 32
"""Exports kept in memory; each is about the size of the version's artifact."""


class Exports:
    """The ONNX models of stored versions."""

    def __init__(self, database: Database) -> None:
        self.database = database
        self.models: Memo[OnnxExport] = Memo(EXPORTS_KEPT)

    def onnx(self, name: str, selector: Selector, dtype: Dtype) -> tuple[VersionRecord, OnnxExport]:
        """The selected version (read now, as the JSON artifact is) and its ONNX export."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, selector)
            key = (record.name, record.version, dtype)
            kept = self.models.get(key)
            if kept is not None:
                return record, kept
            data = repo.get_artifact(record.id)

        def build() -> OnnxExport:
            loaded = LoadedVersion.from_artifact(record, data)
            return export_onnx(
                loaded.calibrator,
                record.n_classes,
                dtype=dtype,
                metadata={
                    "calibrator": record.name,
                    "version": str(record.version),
                    "method": record.method,
                    "n_classes": str(record.n_classes),
                    "artifact_sha256": record.artifact_sha256,
                    "exported_by": f"calibration-service {package_version('calibration-service')}",
                },
            )

        return record, self.models.get_or_compute(key, build)
