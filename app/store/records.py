"""What the repository takes and gives: frozen dataclasses, never ORM objects.

A record outlives its session, so the service and the API can hold and cache it freely.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

MAX_TAGS = 100
"""Tags one version may carry, whether given at fit or merged in by PATCH."""


@dataclass(frozen=True)
class NewVersion:
    """Everything a fit produced, to be stored as the next version of a calibrator.

    ``n_positive`` counts label 1 of a binary batch (None for multiclass); ``class_counts``
    counts every label 0..k-1.

    ``artifact`` is the document of :func:`app.store.artifacts.encode_artifact`; ``batch`` the
    bytes of :func:`app.store.batches.encode_batch`. The store computes the artifact's sha256.
    ``blob_keys``: the (artifact, batch) keys in object storage once
    :meth:`~app.store.db.Database.offloaded` uploaded them, before the unit of work.
    ``score_reference``: a binary batch's score bins (:class:`~app.calibration.ScoreReference`),
    which monitoring counts its traffic's raw scores in.
    """

    method: str
    params: dict[str, Any]
    n_samples: int
    n_positive: int | None
    n_classes: int
    class_counts: list[int]
    description: str
    tags: dict[str, str]
    metrics: dict[str, Any]
    selection: dict[str, Any] | None
    artifact: bytes
    batch: bytes | memoryview
    source: dict[str, Any] | None = None
    blob_keys: tuple[str, str] | None = None
    score_reference: bytes | None = None


@dataclass(frozen=True)
class VersionRecord:
    """A stored version's metadata (its blobs: ``Repository.get_artifact`` and ``get_batch``).

    ``id`` is the row id, internal to the store; clients know a version as (name, version).
    ``aliases`` are the alias names currently pointing at this version, sorted.
    """

    id: int
    name: str
    version: int
    method: str
    params: dict[str, Any]
    n_samples: int
    n_positive: int | None
    n_classes: int
    class_counts: list[int]
    created_at: datetime
    description: str
    tags: dict[str, str]
    metrics: dict[str, Any]
    selection: dict[str, Any] | None
    artifact_sha256: str
    artifact_bytes: int
    aliases: tuple[str, ...] = ()
    source: dict[str, Any] | None = None


@dataclass(frozen=True)
class CalibratorSummary:
    """One calibrator as listed: its latest version (None when it has none left) and count."""

    name: str
    latest_version: int | None
    method: str | None
    n_versions: int
    updated_at: datetime
