"""The batches stored before format 1 (:mod:`app.store.batches`): an npz of the four arrays,
read by ``np.load(..., allow_pickle=False)``, so nothing is ever unpickled."""

from __future__ import annotations

import io
import zipfile

import numpy as np

from app.store.artifacts import ArtifactError
from app.store.batch_checks import BATCH_FIELDS, StoredBatch, check_batch

NPZ_MAGIC = b"PK\x03\x04"
"""How an npz archive (a zip file) begins."""


def decode_npz(data: bytes | memoryview) -> StoredBatch:
    """Read a batch written before format 1: an npz of the four arrays."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            if not isinstance(npz, np.lib.npyio.NpzFile):
                raise ArtifactError("stored batch is not an npz archive")
            names = sorted(npz.files)
            if names != sorted(BATCH_FIELDS):
                raise ArtifactError(
                    f"stored batch holds arrays {names}; expected {sorted(BATCH_FIELDS)}"
                )
            arrays = {name: npz[name] for name in BATCH_FIELDS}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, ArtifactError):
            raise
        raise ArtifactError(f"stored batch cannot be read: {exc}") from exc
    check_batch(arrays)
    return StoredBatch(**arrays)
