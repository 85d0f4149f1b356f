"""A version's stored bytes: its artifact whole, its fitting batch without the GIL; or, with
object storage, their keys there (:mod:`app.store.objects`).

A batch of 10^7 rows is 160 MB, and a driver that copies a value whole holds the GIL while it
does, which stalls the event loop of the whole worker: psycopg decodes a 250 MB ``bytea`` for
most of a second, and sqlite3 binds a 160 MB parameter in about 60 ms. So the batch is read in
pieces of :data:`BLOB_PIECE_BYTES`, and written on SQLite through its incremental blob I/O,
which copies with the GIL released.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, cast

from sqlalchemy import func, insert, literal_column, or_, select
from sqlalchemy.orm import InstrumentedAttribute

from app.errors import NotFound, ObjectStoreUnavailable
from app.store.models import VersionBlob
from app.store.session import RepositoryBase
from app.store.sql import postgresql

BLOB_LOCK = 0x63616C69626C6F62
"""The PostgreSQL advisory lock key of versions' blobs in object storage (``b"caliblob"``)."""
BLOB_PIECE_BYTES = 4 * 1024 * 1024
"""Bytes of a stored batch read per statement (see :meth:`BlobOperations.get_batch`)."""


class BlobOperations(RepositoryBase):
    """The artifact and batch writes and reads of :class:`app.store.repository.Repository`."""

    def add_blobs(
        self,
        version_id: int,
        artifact: bytes,
        batch: bytes | memoryview,
        keys: tuple[str, str] | None = None,
    ) -> None:
        """Store the artifact and the fitting batch of the new version row ``version_id``.

        With object storage the row keeps their ``keys`` there (uploaded before the unit of
        work by :meth:`~app.store.db.Database.offloaded`; here, if not) and no bytes.

        On SQLite the batch goes in through the driver's incremental blob I/O, in the same
        transaction: ``zeroblob`` reserves its bytes, ``Connection.blobopen`` writes them with
        the GIL released (binding 160 MB held it for about 60 ms, and took 270 ms against
        210 ms, measured). On PostgreSQL the row is inserted as before: psycopg sends a
        ``bytea`` parameter in binary (how long it holds the GIL doing so is not measured).
        """
        if keys is None and self._objects is not None:
            keys = self._objects.put(artifact), self._objects.put(batch)
        if keys is not None:
            self.lock_blobs(shared=True)
            self._session.execute(
                insert(VersionBlob).values(
                    version_id=version_id,
                    artifact=b"",
                    batch=b"",
                    artifact_key=keys[0],
                    batch_key=keys[1],
                )
            )
            return
        session = self._session
        if postgresql(session):
            session.add(VersionBlob(version_id=version_id, artifact=artifact, batch=batch))
            session.flush()
            return
        data = memoryview(batch).cast("B")  # bytes, whatever the view's item format
        rowid: int = session.execute(
            insert(VersionBlob)
            .values(version_id=version_id, artifact=artifact, batch=func.zeroblob(data.nbytes))
            .returning(literal_column("rowid"))
        ).scalar_one()
        driver = cast(sqlite3.Connection, session.connection().connection.driver_connection)
        with driver.blobopen(VersionBlob.__tablename__, "batch", rowid) as blob:
            blob.write(data)

    def get_artifact(self, version_id: int) -> bytes:
        """The artifact of the version with row id ``version_id`` (without its batch): the
        bytes in its row, or those its key names in object storage (one read of the row)."""
        artifact, key = self._row(VersionBlob.artifact, VersionBlob.artifact_key, version_id)
        return bytes(artifact) if key is None else bytes(self._fetch(key))  # a few kilobytes

    def get_batch(self, version_id: int) -> bytes | memoryview:
        """The fitting batch (see :mod:`app.store.batches`) of the row ``version_id``.

        Read :data:`BLOB_PIECE_BYTES` at a time, by ``substr``, on either database; a large
        batch comes as a read-only view of the bytes read, never held twice. With object
        storage, the object its key names (its size and key are one read of the row)."""
        size, key = self._row(func.length(VersionBlob.batch), VersionBlob.batch_key, version_id)
        if key is not None:
            return self._fetch(key)
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

    def blob_keys(self, among: Sequence[str] | None = None) -> set[str]:
        """The keys in object storage versions' rows name (of ``among``, when given): what
        :func:`~app.store.collect.collect_blobs` keeps."""
        query = select(VersionBlob.artifact_key, VersionBlob.batch_key)
        if among is not None:
            query = query.where(
                or_(VersionBlob.artifact_key.in_(among), VersionBlob.batch_key.in_(among))
            )
        return {key for pair in self._session.execute(query) for key in pair if key is not None}

    def lock_blobs(self, *, shared: bool) -> None:
        """PostgreSQL: hold :data:`BLOB_LOCK` until the transaction ends, shared by the
        writers of versions' rows, exclusive for a collection's delete, so that a delete never
        falls between a row's insert and its commit. SQLite: nothing, its write transactions
        already run one at a time."""
        if postgresql(self._session):
            function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
            self._session.execute(select(getattr(func, function)(BLOB_LOCK)))

    def _row(self, value: Any, key: InstrumentedAttribute[str | None], version_id: int) -> Any:
        """``(value, key)`` of the row ``version_id``: a blob (or its length) and its key in
        object storage (None: the blob is in the row); NotFound when the row is gone."""
        row = self._session.execute(
            select(value, key).where(VersionBlob.version_id == version_id)
        ).first()
        if row is None:
            raise NotFound("the version was deleted meanwhile")
        return row

    def _fetch(self, key: str) -> memoryview:
        """The blob stored under ``key`` in object storage, checked against it."""
        if self._objects is None:
            raise ObjectStoreUnavailable(
                "this version's blobs are in object storage, and CALIBRATION_BLOB_URL is not set"
            )
        return self._objects.get(key)
