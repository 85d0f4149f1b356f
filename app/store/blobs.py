"""Reading a version's stored bytes: its artifact whole, its fitting batch in pieces."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute

from app.errors import NotFound
from app.store.models import VersionBlob
from app.store.session import RepositoryBase

BLOB_PIECE_BYTES = 4 * 1024 * 1024
"""Bytes of a stored batch read per statement (see :meth:`BlobReads.get_batch`)."""


class BlobReads(RepositoryBase):
    """The artifact and batch reads of :class:`app.store.repository.Repository`."""

    def get_artifact(self, version_id: int) -> bytes:
        """The artifact of the version with row id ``version_id`` (without its batch)."""
        return self._blob(VersionBlob.artifact, version_id)

    def get_batch(self, version_id: int) -> bytes | memoryview:
        """The fitting batch (see :mod:`app.store.batches`) of the row ``version_id``.

        Read :data:`BLOB_PIECE_BYTES` at a time: a driver converts a value holding the GIL
        (psycopg decodes a 250 MB ``bytea`` for most of a second), which would stall the
        event loop of the whole worker; pieces keep each stall to milliseconds and never
        hold the value twice (a large batch comes as a read-only view of the bytes read)."""
        size = self._session.scalar(
            select(func.length(VersionBlob.batch)).where(VersionBlob.version_id == version_id)
        )
        if size is None:
            raise NotFound("the version was deleted meanwhile")
        data = bytearray(size)
        for start in range(0, size, BLOB_PIECE_BYTES):
            piece = self._session.scalar(
                select(func.substr(VersionBlob.batch, start + 1, BLOB_PIECE_BYTES)).where(
                    VersionBlob.version_id == version_id
                )
            )
            if piece is None or len(piece) != min(BLOB_PIECE_BYTES, size - start):
                raise NotFound("the version was deleted meanwhile")
            data[start : start + len(piece)] = piece
        return bytes(data) if size <= BLOB_PIECE_BYTES else memoryview(data).toreadonly()

    def _blob(self, column: InstrumentedAttribute[bytes], version_id: int) -> bytes:
        blob = self._session.scalar(select(column).where(VersionBlob.version_id == version_id))
        if blob is None:
            raise NotFound("the version was deleted meanwhile")
        return bytes(blob)
