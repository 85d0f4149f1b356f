"""The persistence layer: SQLAlchemy models, the repository, the artifact formats.

Everything the service needs is exported here::

    database = Database(settings.database_url, settings)
    with database.transaction() as repo:
        record = repo.create_version("churn", NewVersion(...))

Nothing outside the store imports its modules, but for :mod:`app.store.migrate` (``upgrade``,
``downgrade``, ``migrate_when_ready``), which is also the command ``python -m app.store.migrate``
and so is not imported here.
"""

from app.store.aliases import AliasMoved
from app.store.artifacts import (
    Artifact,
    ArtifactError,
    decode_artifact,
    encode_artifact,
    sha256_hex,
)
from app.store.batch_checks import StoredBatch
from app.store.batches import decode_batch, encode_batch
from app.store.db import Database
from app.store.engines import normalize_url
from app.store.fit_keys import KEY_LIFETIME, KeyState, Lease
from app.store.records import MAX_TAGS, CalibratorSummary, NewVersion, VersionRecord
from app.store.repository import Repository, Selector
from app.store.traffic.outcomes import OutcomeCounts
from app.store.traffic.periods import DAY, HOUR, ceil_to, hour_of
from app.store.traffic.reads import ClassRows, MixedClasses
from app.store.traffic.rows import LoggedPrediction

__all__ = [
    "DAY",
    "HOUR",
    "KEY_LIFETIME",
    "MAX_TAGS",
    "AliasMoved",
    "Artifact",
    "ArtifactError",
    "CalibratorSummary",
    "ClassRows",
    "Database",
    "KeyState",
    "Lease",
    "LoggedPrediction",
    "MixedClasses",
    "NewVersion",
    "OutcomeCounts",
    "Repository",
    "Selector",
    "StoredBatch",
    "VersionRecord",
    "ceil_to",
    "decode_artifact",
    "decode_batch",
    "encode_artifact",
    "encode_batch",
    "hour_of",
    "normalize_url",
    "sha256_hex",
]
