"""A stored version, decoded and ready to predict: what the version cache holds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.calibration import CalibrationError, Calibrator, MulticlassCalibrator, load_calibrator
from app.errors import StoredDataCorrupt, invalid
from app.service.batches import check_scores
from app.store import ArtifactError, VersionRecord, decode_artifact


@dataclass(frozen=True)
class LoadedVersion:
    """A version ready to predict: its row id, method, number of classes and
    fitted calibrator (binary: vectors in and out; multiclass: n x k matrices)."""

    version_id: int
    name: str
    version: int
    method: str
    n_classes: int
    calibrator: Calibrator | MulticlassCalibrator
    state: dict[str, Any]

    @classmethod
    def of(
        cls,
        record: VersionRecord,
        calibrator: Calibrator | MulticlassCalibrator,
        state: Mapping[str, Any],
    ) -> LoadedVersion:
        """The stored version ``record`` with its calibrator, fitted or loaded."""
        return cls(
            record.id,
            record.name,
            record.version,
            record.method,
            record.n_classes,
            calibrator,
            dict(state),
        )

    @classmethod
    def of_state(cls, record: VersionRecord, state: Mapping[str, Any]) -> LoadedVersion:
        """The stored version ``record`` with the calibrator its fitted ``state`` makes."""
        calibrator = load_calibrator(
            record.method, record.params, dict(state), n_classes=record.n_classes
        )
        return cls.of(record, calibrator, state)

    @classmethod
    def from_artifact(cls, record: VersionRecord, artifact_bytes: bytes) -> LoadedVersion:
        """The version decoded from its stored artifact (StoredDataCorrupt when it cannot be)."""
        try:
            artifact = decode_artifact(artifact_bytes, record.artifact_sha256)
            calibrator = load_calibrator(
                artifact.method, artifact.params, artifact.state, n_classes=record.n_classes
            )
        except (ArtifactError, CalibrationError) as exc:
            raise StoredDataCorrupt(
                f"the artifact of {record.name!r} v{record.version} cannot be loaded: {exc}"
            ) from None
        return cls.of(record, calibrator, artifact.state)

    def checked_predict(self, scores: NDArray[np.float64]) -> NDArray[np.float64]:
        """The probabilities for scores of the version's shape, all finite (else 422)."""
        self.check_shape(scores)
        check_scores(scores)
        return self.predict(scores)

    def predict(self, scores: NDArray[np.float64]) -> NDArray[np.float64]:
        """The calibrated probabilities; scores the method refuses (bostrom: rows that are not
        probability vectors) are a 422 naming ``scores``, never a 500."""
        try:
            probabilities: NDArray[np.float64] = self.calibrator.predict(scores)
        except CalibrationError as exc:
            where = exc.loc or ("scores",)
            raise invalid(where, f"{exc.reason} ({self.name!r} v{self.version})") from None
        return probabilities

    def check_shape(self, scores: NDArray[np.float64]) -> None:
        """Vectors for binary versions, n x k matrices for k-class versions (else 422)."""
        if self.n_classes == 2:
            if scores.ndim != 1:
                where = f"{self.name!r} v{self.version}"
                raise invalid(
                    ("scores",),
                    f"is a matrix but {where} is a binary calibrator; send one score per element",
                )
        elif scores.ndim != 2 or scores.shape[1] != self.n_classes:
            where = f"{self.name!r} v{self.version}"
            shape = "a vector" if scores.ndim == 1 else f"an n x {scores.shape[1]} matrix"
            raise invalid(
                ("scores",),
                f"is {shape} but {where} calibrates {self.n_classes} classes; "
                f"send an n x {self.n_classes} matrix",
            )
