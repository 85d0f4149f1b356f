"""A version's stored bytes: its artifact whole, its fitting batch written and read in pieces.

A batch of 10^7 rows is 160 MB, and a driver copies a value whole while it holds the GIL
(psycopg decodes a 250 MB ``bytea`` for most of a second; sqlite3 binds 160 MB in ~60 ms),
which stalls the event loop of the whole worker. Pieces of :data:`BLOB_PIECE_BYTES` keep each
hold to a millisecond or two.
"""

from __future__ import annotations

import sqlite3
from typing import cast

from sqlalchemy import func, insert, literal_column, select
from sqlalchemy.orm import InstrumentedAttribute

from app.errors import NotFound
from app.store.models import VersionBlob
from app.store.session import RepositoryBase

BLOB_PIECE_BYTES = 4 * 1024 * 1024
"""Bytes of a stored batch read per statement (:meth:`BlobOperations.get_batch`) or written
per call (:meth:`BlobOperations.add_blobs`)."""


class BlobOperations(RepositoryBase):
    """The artifact and batch writes and reads of :class:`app.store.repository.Repository`."""

    def add_blobs(self, version_id: int, artifact: bytes, batch: bytes | memoryview) -> None:
        """Store the artifact and the fitting batch of the new version row ``version_id``.

        On SQLite the batch is written in pieces through the driver's incremental blob I/O
        (``zeroblob`` reserves its bytes, ``Connection.blobopen`` writes them), in the same
        transaction; binding it whole held the GIL for 60 to 100 ms at 10^7 rows. PostgreSQL's
        driver sends a ``bytea`` parameter as it is, in binary.
        """
        session = self._session
        if session.get_bind().dialect.name != "sqlite":
            session.add(VersionBlob(version_id=version_id, artifact=artifact, batch=batch))
            session.flush()
            return
        rowid: int = session.execute(
            insert(VersionBlob)
            .values(version_id=version_id, artifact=artifact, batch=func.zeroblob(len(batch)))
            .returning(literal_column("rowid"))
        ).scalar_one()
        driver = cast(sqlite3.Connection, session.connection().connection.driver_connection)
        pieces = memoryview(batch)
        with driver.blobopen(VersionBlob.__tablename__, "batch", rowid) as blob:
            for start in range(0, len(pieces), BLOB_PIECE_BYTES):
                blob.write(pieces[start : start + BLOB_PIECE_BYTES])

    def get_artifact(self, version_id: int) -> bytes:
        """The artifact of the version with row id ``version_id`` (without its batch)."""
        return self._blob(VersionBlob.artifact, version_id)

    def get_batch(self, version_id: int) -> bytes | memoryview:
        """The fitting batch (see :mod:`app.store.batches`) of the row ``version_id``.

        Read :data:`BLOB_PIECE_BYTES` at a time, by ``substr``, on either database; a large
        batch comes as a read-only view of the bytes read, never held twice."""
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
