"""A large fit with its blobs in object storage, against the same fit with them in PostgreSQL.

``python -m bench.objects [N]`` prints the rows alone. Issue 28's target: a fit of 10^7 rows
with the S3 backend takes at most 1.1x the time with its blobs in PostgreSQL, and the
database grows by under 10 KB. Timed in process through the service, as the fit's job runs
it (:meth:`app.service.versions.Versions.fit`: platt, 5-fold cross-validation, the metrics
with their 1000 resamples, the artifact and the 160 MB batch encoded and stored), on a
throwaway PostgreSQL cluster (:mod:`bench.postgres`), against moto's S3 server on loopback
(the tests' server: an S3 API in a thread of this process, so the upload is a real HTTP
PUT of every part, not a disk write). The database's growth is ``pg_database_size`` before
and after each fit, after a first small fit that gave every table its first pages (8 KB
each: a fit into empty tables grows them by about 64 KB whatever its size).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import text

from app.service.batches import validate_batch
from app.service.use_cases import CalibrationService
from app.settings import Settings
from app.store import Database
from app.store.migrate import upgrade
from bench.fits import batch
from bench.http import free_port
from bench.postgres import cluster
from bench.table import Row, Target, markdown, progress, size_label

TIME = Target(1.1)
"""The issue's bound on the fit's time with the S3 backend, over the fit's with PostgreSQL."""
GROWTH = Target(10.0)
"""The issue's bound on the database's growth by the fit with the S3 backend, in KB."""
TARGET_SIZE = 10**7
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}


def object_rows(n: int = TARGET_SIZE) -> list[Row]:
    """The fit's time and the database's growth, blobs in S3 against blobs in PostgreSQL."""
    progress(f"object storage n={n}")
    (s3_seconds, s3_bytes), (pg_seconds, pg_bytes) = _measure(n)
    size = size_label(n)
    target = n == TARGET_SIZE
    return [
        Row("object storage", "fit, blobs in S3 / in PostgreSQL", size, s3_seconds, pg_seconds,
            "s", TIME if target else None),
        Row("object storage", "database growth, S3 / PostgreSQL", size, s3_bytes / 1024,
            pg_bytes / 1024, "KB", GROWTH if target else None, True),
    ]  # fmt: skip


def _measure(n: int) -> tuple[tuple[float, int], tuple[float, int]]:
    """(seconds, bytes the database grew) of one fit with each backend of blobs."""
    from moto.server import ThreadedMotoServer

    os.environ.update({**CREDENTIALS, "AWS_DEFAULT_REGION": "us-east-1"})
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    f, y, _ = batch(n, tied=False)
    try:
        with cluster() as url:
            upgrade(url)
            plain = Settings(database_url=url, max_batch_rows=max(n, 10**6))
            objects = plain.model_copy(
                update={"blob_url": "s3://bench/calibration", "blob_endpoint_url": endpoint}
            )
            _bucket(endpoint)
            fitted = validate_batch(f, y, None, max_rows=plain.max_batch_rows)
            results = []
            small = validate_batch(f[:1000], y[:1000], None, max_rows=plain.max_batch_rows)
            for settings in (objects, plain):
                service = CalibrationService(Database(url, settings), settings, worker=True)
                try:
                    _fit(service, small)  # the tables' first pages: not what a fit costs
                    results.append(_one_fit(service, lambda s=service: _fit(s, fitted)))
                finally:
                    service.close()
                    service.database.dispose()
    finally:
        server.stop()
    return results[0], results[1]


def _bucket(endpoint: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")


def _fit(service: CalibrationService, fitted: Any) -> None:
    service.versions.fit("bench", fitted, method="platt", params={})


def _one_fit(service: CalibrationService, fit: Callable[[], None]) -> tuple[float, int]:
    """The seconds of one ``fit`` and how many bytes the database grew by it (after a
    checkpoint, so that what the fit wrote is counted where it lives)."""

    def size() -> int:
        with service.database.engine.connect() as connection:
            connection.exec_driver_sql("CHECKPOINT")
            found = connection.execute(text("SELECT pg_database_size(current_database())"))
            return int(found.scalar_one())

    before = size()
    start = time.perf_counter()
    fit()
    seconds = time.perf_counter() - start
    return seconds, size() - before


def main() -> None:
    sizes = [int(arg) for arg in sys.argv[1:]] or [TARGET_SIZE]
    rows = [row for n in sizes for row in object_rows(n)]
    print(markdown(rows))


if __name__ == "__main__":
    main()
