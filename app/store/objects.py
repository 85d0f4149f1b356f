"""Versions' blobs in object storage: the S3 API through boto3, content-addressed by sha256.

With ``CALIBRATION_BLOB_URL=s3://bucket/prefix`` a version's artifact and fitting batch go to
the bucket as ``{prefix}/blobs/{sha256}`` and the database keeps only their keys (the
artifact's metadata stays in ``versions``). The endpoint, region and credentials are found the
usual AWS way (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``, profiles, instance
roles), or the endpoint from ``CALIBRATION_BLOB_ENDPOINT_URL``. Without it the blobs stay in
the database (:mod:`app.store.blobs`).

A version exists completely or not at all: a fit uploads its blobs first, inside its unit of
work, and commits its row after. An upload whose commit then fails leaves an object no row
names; :func:`collect` deletes those once they are older than a grace period (never the
object of a fit still under way), as the upkeep of the prediction log runs. Identical content
is one object: two versions fitted on the same batch share it, and it stays while either row
names it.

The traffic history (:mod:`app.store.history`) goes to the same bucket, one Parquet file a
calibrator and day under ``{prefix}/history/``, which a collection never lists.

Every read checks the object's sha256 against its key: a missing object, one that fails the
check, or a bucket that does not answer is :class:`~app.errors.ObjectStoreUnavailable` (503),
logged, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from app.blob_url import BLOB_URL
from app.errors import ObjectStoreUnavailable

logger = logging.getLogger(__name__)

PART_BYTES = 16 * 1024 * 1024
"""Multipart uploads and downloads move a batch this many bytes a part, on a few threads
(boto3's transfer manager, which releases the GIL on the network)."""
CONNECT_SECONDS = 5
READ_SECONDS = 15
"""How long a request to the bucket may wait to connect, and for each read, before it is
retried (three attempts): a bucket that hangs is a 503 within about a minute, not a hang."""


def content_key(data: bytes | memoryview) -> str:
    """The sha256 of ``data`` in hex: an object's name in the store."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class BlobLocation:
    """Where ``s3://bucket/prefix`` puts objects."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> BlobLocation:
        """``s3://bucket`` or ``s3://bucket/some/prefix``; ValueError for anything else."""
        found = BLOB_URL.fullmatch(url)
        if found is None:
            raise ValueError(f"expected s3://bucket[/prefix], got {url!r}")
        return cls(found["bucket"], (found["prefix"] or "").strip("/"))

    def key(self, digest: str) -> str:
        """The object key of content whose sha256 is ``digest``."""
        return f"{self.prefix}/blobs/{digest}" if self.prefix else f"blobs/{digest}"

    @property
    def blobs(self) -> str:
        """The prefix every blob's key starts with (ending in a slash)."""
        return self.key("")

    @property
    def history(self) -> str:
        """The prefix every file of the traffic history starts with (ending in a slash)."""
        return f"{self.prefix}/history/" if self.prefix else "history/"

    def history_key(self, name: str, day: date) -> str:
        """The key of ``name``'s logged predictions of ``day``, hive-style (``calibrator=``,
        ``date=``: DuckDB, Spark and pyarrow read both as columns). The name is
        percent-encoded, which leaves every name the API accepts as it is."""
        named = f"calibrator={quote(name, safe='')}/date={day:%Y-%m-%d}"
        return f"{self.history}{named}/predictions.parquet"


class ObjectStore:
    """A bucket's blobs: put, get (checked), list and delete, through one boto3 client made
    in its process (clients are thread-safe; none crosses a fork: worker processes make
    their own); a second one, quick to give up, answers the readiness check."""

    def __init__(self, url: str, endpoint_url: str | None = None) -> None:
        import boto3  # only a service with object storage needs it loaded
        from boto3.s3.transfer import TransferConfig
        from botocore.config import Config

        self.location = BlobLocation.parse(url)
        session = boto3.session.Session()  # the default session is not safe to share
        patient = Config(
            connect_timeout=CONNECT_SECONDS,
            read_timeout=READ_SECONDS,
            retries={"total_max_attempts": 3, "mode": "standard"},
            tcp_keepalive=True,
        )
        quick = Config(connect_timeout=2, read_timeout=2, retries={"total_max_attempts": 1})
        self._client: Any = session.client("s3", endpoint_url=endpoint_url, config=patient)
        self._probe: Any = session.client("s3", endpoint_url=endpoint_url, config=quick)
        self._transfer = TransferConfig(
            multipart_threshold=PART_BYTES,
            multipart_chunksize=PART_BYTES,
            max_concurrency=4,
            num_download_attempts=2,
        )

    def put(self, data: bytes | memoryview) -> str:
        """Store ``data`` under its sha256 (again, if it is there: the write refreshes its
        time, so a collection spares it); its digest. The bytes are read where they are,
        never copied whole."""
        digest = content_key(data)
        body = _Reader(memoryview(data).cast("B"))
        key = self.location.key(digest)
        self._call(
            "upload",
            key,
            lambda: self._client.upload_fileobj(
                body, self.location.bucket, key, Config=self._transfer
            ),
            f"{digest[:12]}… ",
        )
        return digest

    def get(self, digest: str) -> memoryview:
        """The content stored under ``digest``, checked against it: a read-only view of the
        bytes downloaded, never copied."""
        sink = io.BytesIO()
        key = self.location.key(digest)
        self._call(
            "download",
            key,
            lambda: self._client.download_fileobj(
                self.location.bucket, key, sink, Config=self._transfer
            ),
            f"{digest[:12]}… ",
        )
        data = sink.getbuffer()
        if content_key(data) != digest:
            logger.error("object %s fails its sha256 check", self.location.key(digest))
            raise ObjectStoreUnavailable(
                f"the stored object s3://{self.location.bucket}/{self.location.key(digest)} "
                "fails its sha256 check; restore it from a backup of the bucket"
            )
        return data.toreadonly()

    def has(self, digest: str) -> bool:
        """Whether an object is stored under ``digest`` (its content is not read)."""
        found: list[bool] = []
        key = self.location.key(digest)

        def head() -> None:
            found.append(
                self._exists(lambda: self._client.head_object(Bucket=self.location.bucket, Key=key))
            )

        self._call("check", key, head, f"{digest[:12]}… ")
        return found[0]

    def upload_file(self, path: Path, key: str) -> None:
        """Upload the file at ``path`` as ``key`` (boto3's managed upload: in parts of
        :data:`PART_BYTES` past that size, a few at a time)."""
        bucket = self.location.bucket
        upload = self._client.upload_file
        self._call("upload", key, lambda: upload(str(path), bucket, key, Config=self._transfer))

    def download_file(self, key: str, path: Path) -> None:
        """Download ``key`` into the file at ``path`` (in parts, as uploaded)."""
        bucket = self.location.bucket
        download = self._client.download_file
        self._call("download", key, lambda: download(bucket, key, str(path), Config=self._transfer))

    def listed(self, prefix: str | None = None) -> Iterator[tuple[str, datetime]]:
        """Every object under ``prefix`` (default: every blob, by digest): its key less the
        prefix, and when it was last written."""
        under = self.location.blobs if prefix is None else prefix
        pages = self._client.get_paginator("list_objects_v2").paginate(
            Bucket=self.location.bucket, Prefix=under
        )
        for page in pages:
            for entry in page.get("Contents", ()):
                yield entry["Key"].removeprefix(under), entry["LastModified"]

    def delete(self, digests: list[str]) -> None:
        """Delete these blobs (at most a thousand: one request)."""
        self.delete_keys([self.location.key(d) for d in digests])

    def delete_keys(self, keys: list[str]) -> None:
        """Delete the objects of these keys, a thousand a request (S3's most)."""
        for start in range(0, len(keys), 1000):
            self._client.delete_objects(
                Bucket=self.location.bucket,
                Delete={
                    "Objects": [{"Key": key} for key in keys[start : start + 1000]],
                    "Quiet": True,
                },
            )

    def ping(self) -> bool:
        """Whether the bucket answers ``HEAD`` within a few seconds (the readiness check)."""
        try:
            self._probe.head_bucket(Bucket=self.location.bucket)
        except Exception as exc:  # any failure means not ready; say which
            logger.warning("object store ping failed: %s", exc)
            return False
        return True

    @staticmethod
    def _exists(head: Callable[[], object]) -> bool:
        """``head()`` answered (True) or said 404 (False); other failures raise."""
        from botocore.exceptions import ClientError

        try:
            head()
        except ClientError as exc:
            if _code(exc) in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def _call(self, what: str, key: str, run: Callable[[], None], shown: str = "") -> None:
        """``run()``, its failures as :class:`ObjectStoreUnavailable` naming the object (its
        ``key``, after ``shown``): the client's (botocore's, boto3's) and its transfers'
        (s3transfer's retries given up, an object changed while read)."""
        from boto3.exceptions import Boto3Error
        from botocore.exceptions import BotoCoreError, ClientError
        from s3transfer.exceptions import RetriesExceededError

        try:
            run()
        except (BotoCoreError, ClientError, Boto3Error, RetriesExceededError) as exc:
            logger.error("object store %s of %s failed: %s", what, key, exc)
            code = _code(exc) if isinstance(exc, ClientError) else ""
            if code in ("404", "NoSuchKey") and not self.ping():  # HEAD says 404 for both
                code = "NoSuchBucket"
            reason = {
                "404": "is missing",
                "NoSuchKey": "is missing",
                "NoSuchBucket": "is in a bucket that does not exist",
            }.get(code, "could not be reached")
            raise ObjectStoreUnavailable(
                f"the stored object {shown}{reason} (s3://{self.location.bucket}/{key})"
            ) from None


class _Reader(io.RawIOBase):
    """A read-only file over bytes already in memory, for an upload that must not copy
    them (``io.BytesIO`` of a view copies it whole)."""

    def __init__(self, view: memoryview) -> None:
        self._view = view
        self._at = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: len(self._view)}[whence]
        self._at = max(0, base + offset)
        return self._at

    def readinto(self, buffer: Any) -> int:
        taken = self._view[self._at : self._at + len(buffer)]
        buffer[: len(taken)] = taken
        self._at += len(taken)
        return len(taken)


def _code(exc: Any) -> str:
    """A botocore ClientError's error code."""
    return str(exc.response.get("Error", {}).get("Code", ""))
