"""A day of the prediction log in PostgreSQL, before and after ``python -m app.store.history``
exported it to object storage.

``python -m bench.history [N]`` prints the rows alone. Issue 28's target: the bytes the
database holds per logged labelled row of an exported day are 0. N predictions (default
10^6) are logged through the store on a day 10 days back (its own partition, as the log's
upkeep makes them) and every one labelled, then the day is exported
(:func:`app.store.history.run_history`, 7 hot days) to moto's S3 server on loopback (the
tests' server: real HTTP PUTs of every part), on a throwaway cluster (:mod:`bench.postgres`).

The rows: the day's bytes in the database per row after against before (its partition with
its indexes, its share of ``prediction_keys`` and of ``exported_days``), each part on its
own (the keys stay until the retention, as the ids' first records; the record is its row's
bytes, a page holding many), the Parquet file's
bytes per row against the partition's, the export's time against one read of the day from
the database, and a read of the day from its file against that read. Sizes after a plain
``VACUUM`` (the outcomes' updates leave dead rows, which autovacuum would reclaim).
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, date, datetime, timedelta

import numpy as np
from sqlalchemy import text

from app.settings import Settings
from app.store import Database, LoggedPrediction, NewVersion, encode_artifact, encode_batch
from app.store.history import run_history
from app.store.migrate import upgrade
from app.store.traffic.partitions import ensure_partitions, partition_name
from bench.http import free_port
from bench.postgres import cluster
from bench.table import Row, Target, markdown, progress, size_label

N = 10**6
CHUNK = 100_000
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
ZERO = Target(0.0)
"""The issue's bound on an exported day's bytes per row in the database (the partition's)."""


def history_rows(n: int = N) -> list[Row]:
    """The rows, on a throwaway cluster and moto's server."""
    from moto.server import ThreadedMotoServer

    progress(f"traffic history n={n}")
    os.environ.update({**CREDENTIALS, "AWS_DEFAULT_REGION": "us-east-1"})
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        with cluster() as url:
            upgrade(url)
            return _rows(n, url, f"http://127.0.0.1:{port}")
    finally:
        server.stop()


def _rows(n: int, url: str, endpoint: str) -> list[Row]:
    import boto3

    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bench")
    settings = Settings(
        database_url=url, blob_url="s3://bench/calibration", blob_endpoint_url=endpoint
    )
    database = Database(url, settings)
    now = datetime.now(UTC)
    day = now.date() - timedelta(days=10)
    try:
        _log(database, day, n)
        before = _sizes(database, day)
        read_db = _read(database, day)
        start = time.perf_counter()
        run = run_history(database, settings, now)
        export = time.perf_counter() - start
        assert run.rows == n, run
        after = _sizes(database, day)
        read_file = _read(database, day)
        head = database.objects._client.head_object(  # type: ignore[union-attr]
            Bucket="bench",
            Key=f"calibration/history/calibrator=bench/date={day}/predictions.parquet",
        )
    finally:
        database.dispose()
    size = size_label(n)
    return [
        Row("history", "DB bytes per labelled row of the day, exported / before", size,
            sum(after.values()) / n, sum(before.values()) / n, "B"),
        Row("history", "  its partition, exported / before", size, after["partition"] / n,
            before["partition"] / n, "B", ZERO, True),
        Row("history", "  its keys (kept to the retention), exported / before", size,
            after["keys"] / n, before["keys"] / n, "B"),
        Row("history", "  its export record, exported / before", size, after["record"] / n,
            before["record"] / n, "B"),
        Row("history", "Parquet bytes per row / the partition's", size,
            head["ContentLength"] / n, before["partition"] / n, "B"),
        Row("history", "export of the day / a read of it from PostgreSQL", size, export,
            read_db, "s"),
        Row("history", "a read of the day from Parquet / from PostgreSQL", size, read_file,
            read_db, "s"),
    ]  # fmt: skip


def _log(database: Database, day: date, n: int) -> None:
    """``n`` labelled predictions of ``bench`` v1 on ``day``, in its partition."""
    rng = np.random.default_rng(28)
    scores = rng.normal(0.3, 1.6, n)
    probabilities = 1 / (1 + np.exp(-scores))
    labels = (rng.random(n) < probabilities).astype(int)
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    with database.transaction(write=True) as repo:
        ensure_partitions(repo._session.connection(), day, day)
        repo.create_version("bench", _version())
    for first in range(0, n, CHUNK):
        rows = [
            LoggedPrediction(
                "bench",
                f"id-{i}",
                1,
                start + timedelta(microseconds=int(i * 86_400e6 / n)),
                float(scores[i]),
                float(probabilities[i]),
            )
            for i in range(first, min(n, first + CHUNK))
        ]
        with database.transaction(write=True) as repo:
            repo.log_predictions(rows)
        outcomes = [(f"id-{i}", int(labels[i])) for i in range(first, min(n, first + CHUNK))]
        with database.transaction(write=True) as repo:
            repo.record_outcomes("bench", outcomes, start + timedelta(days=1))


def _version() -> NewVersion:
    scores = np.linspace(-2, 2, 20)
    labels = (scores > 0).astype(np.int64)
    return NewVersion(
        method="platt",
        params={},
        n_samples=20,
        n_positive=10,
        n_classes=2,
        class_counts=[10, 10],
        description="",
        tags={},
        metrics={},
        selection=None,
        artifact=encode_artifact("platt", {}, {"A": -1.0, "B": 0.0}),
        batch=encode_batch(scores, labels, np.ones(20), scores),
    )


def _sizes(database: Database, day: date) -> dict[str, float]:
    """The day's bytes in the database: its partition, the keys, the export records."""
    with database.engine.connect() as connection:
        connection.execution_options(isolation_level="AUTOCOMMIT")
        partition = partition_name(day)
        exists = connection.execute(text("SELECT to_regclass(:t)"), {"t": partition}).scalar()
        for table in ([partition] if exists else []) + ["prediction_keys"]:
            connection.execute(text(f"VACUUM {table}"))

        def size(table: str) -> float:
            found = connection.execute(text("SELECT pg_total_relation_size(:t)"), {"t": table})
            return float(found.scalar_one())

        record = connection.execute(
            text("SELECT coalesce(sum(pg_column_size(e.*)), 0) FROM exported_days e")
        )
        return {
            "partition": size(partition) if exists else 0.0,
            "keys": size("prediction_keys"),  # every key is of that day here
            "record": float(record.scalar_one()),  # its row (one page holds many days')
        }


def _read(database: Database, day: date) -> float:
    """The seconds of one read of the day's rows, as monitoring reads them."""
    start = datetime(day.year, day.month, day.day, tzinfo=UTC)
    began = time.perf_counter()
    with database.transaction() as repo:
        for _ in repo.traffic_chunks("bench", start, start + timedelta(days=1)):
            pass
    return time.perf_counter() - began


def main() -> None:
    sizes = [int(arg) for arg in sys.argv[1:]] or [N]
    print(markdown([row for n in sizes for row in history_rows(n)]))


if __name__ == "__main__":
    main()
