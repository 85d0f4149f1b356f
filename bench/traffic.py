"""The traffic loop at 10^6 on PostgreSQL (issue 11), each step over HTTP against a floor.

1. 10^6 predictions logged: 1,000 predicts of 1,000 scores with ids, timed until the last row
   is in the table, against psycopg's ``COPY`` of the same rows into a copy of the table
   (indexes included): what a client writing them itself could not beat.
2. 10^6 outcomes posted: ten ``POST …/outcomes`` of 10^5 ids, against one bare
   ``UPDATE … FROM unnest`` per 10^5 on that copy.
3. One ``monitoring?window=1d`` over the labelled 10^6, against the same computation
   (:class:`app.service.traffic.monitoring.Monitor`) on the arrays in memory: what reading them
   costs.
4. A fit ``from_traffic`` (Platt) on the 10^6 labelled predictions, against the same fit of
   the same pairs posted as a JSON batch.
5. The bytes a labelled row takes (its day partition, indexes and key included), against the
   same rows in one plain table: the figure docs/traffic.md's sizing paragraph multiplies.

Every wait is bounded in time; the cluster is thrown away after.
"""

from __future__ import annotations

import os
import re
import sys
import time
from datetime import UTC, datetime, timedelta

import httpx
import numpy as np
import orjson
import psycopg

from app.calibration import ScoreReference
from app.service.traffic.monitoring import Monitor
from app.store.migrate import upgrade
from bench.fits import batch
from bench.http import serve
from bench.postgres import cluster
from bench.table import Row, progress, size_label

N = 10**6
PREDICT_IDS = 1_000
OUTCOME_IDS = 100_000
WRITTEN_SECONDS = 600.0
"""The longest the log may take to reach the table."""


def traffic_rows(n: int = N, database_url: str | None = None) -> list[Row]:
    """The five rows, on an empty PostgreSQL database at ``database_url``, or by default on
    a throwaway cluster (Debian's server: ``make bench`` installs it)."""
    if database_url is not None:
        return _rows(n, database_url)
    with cluster() as url:
        return _rows(n, url)


def _rows(n: int, url: str) -> list[Row]:
    """The five rows, measured against the service served over ``url`` (migrated here)."""
    env = {
        **os.environ,
        "CALIBRATION_DATABASE_URL": url,
        "CALIBRATION_LOG_LEVEL": "warning",
        # the predicts outrun the writer: room for all, so that the step times the writer
        "CALIBRATION_TRAFFIC_BUFFER_ROWS": str(max(n, 100_000)),
    }
    upgrade(url)  # here: a migrating child would cost one more interpreter start
    dsn = url.replace("postgresql+psycopg", "postgresql")
    with (
        serve("app.main:app", env) as base,
        httpx.Client(base_url=base, timeout=600) as client,
        psycopg.connect(dsn, autocommit=True) as db,
    ):
        f, y, _ = batch(2000, tied=False, seed=8)
        _post(client, "fit", {"scores": f, "labels": y.astype(int), "method": "platt"})
        rng = np.random.default_rng(9)
        scores = rng.normal(0.3, 1.6, n)
        ids = [f"id-{i}" for i in range(n)]
        started, size = datetime.now(UTC), size_label(n)
        logged, probabilities = _log(client, db, scores, ids)
        labels = (rng.random(n) < probabilities).astype(int)
        rows = [
            Row("traffic", f"{size} predictions logged (HTTP) / COPY", size, *logged, "s"),
            Row(
                "traffic",
                f"{size} outcomes posted (HTTP) / UPDATE FROM unnest",
                size,
                *_outcomes(client, db, ids, labels),
                "s",
            ),
        ]
        window = (started - timedelta(days=1), datetime.now(UTC) + timedelta(seconds=1))
        rows.append(_monitoring(client, window, scores, probabilities, labels, f, size))
        rows.append(_refit(client, scores, labels, size))
        rows.append(_bytes_per_row(db, n, size))
        return rows


def _post(client: httpx.Client, path: str, body: object) -> httpx.Response:
    response = client.post(
        f"/v1/calibrators/live/{path}",
        content=orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY),
        headers={"content-type": "application/json"},
    )
    response.raise_for_status()
    return response


def _log(
    client: httpx.Client, db: psycopg.Connection, scores: np.ndarray, ids: list[str]
) -> tuple[tuple[float, float], np.ndarray]:
    """(ours, floor) seconds to log ``scores`` under ``ids``; the probabilities answered."""
    progress(f"traffic: {scores.size} predictions logged, {PREDICT_IDS} a request")
    answered = []
    start = time.perf_counter()
    for k in range(0, scores.size, PREDICT_IDS):
        body = {"scores": scores[k : k + PREDICT_IDS], "ids": ids[k : k + PREDICT_IDS]}
        answered.append(_post(client, "predict", body).json()["probabilities"])
    deadline = time.monotonic() + WRITTEN_SECONDS
    while _count(db, "predictions") < scores.size:
        dropped = re.search(
            r"^calibration_traffic_dropped_total (\S+)", client.get("/metrics").text, re.M
        )
        if dropped and float(dropped.group(1)) > 0:
            raise RuntimeError(f"the log dropped {dropped.group(1)} predictions")
        if time.monotonic() > deadline:
            raise RuntimeError(f"the log did not reach the table in {WRITTEN_SECONDS:g} s")
        time.sleep(0.1)
    ours = time.perf_counter() - start
    probabilities = np.concatenate(answered)
    db.execute("CREATE TABLE floor (LIKE predictions INCLUDING ALL)")
    progress("traffic: the same rows by COPY")
    now = datetime.now(UTC)
    start = time.perf_counter()
    columns = "name, client_id, version, score, probability, predicted_at"
    with db.cursor() as cursor, cursor.copy(f"COPY floor ({columns}) FROM STDIN") as copy:
        for i, client_id in enumerate(ids):
            copy.write_row(("live", client_id, 1, scores[i], probabilities[i], now))
    return (ours, time.perf_counter() - start), probabilities


def _outcomes(
    client: httpx.Client, db: psycopg.Connection, ids: list[str], labels: np.ndarray
) -> tuple[float, float]:
    progress(f"traffic: {len(ids)} outcomes, {OUTCOME_IDS} a request")
    start = time.perf_counter()
    for k in range(0, len(ids), OUTCOME_IDS):
        body = {"ids": ids[k : k + OUTCOME_IDS], "labels": labels[k : k + OUTCOME_IDS]}
        counts = _post(client, "outcomes", body).json()
        if counts["matched"] != len(body["ids"]):
            raise RuntimeError(f"outcomes matched {counts}")
    ours = time.perf_counter() - start
    start = time.perf_counter()
    for k in range(0, len(ids), OUTCOME_IDS):
        db.execute(
            "UPDATE floor AS p SET label = u.label, labelled_at = now() "
            "FROM unnest(%s::text[], %s::integer[]) AS u(client_id, label) "
            "WHERE p.name = 'live' AND p.client_id = u.client_id",
            (ids[k : k + OUTCOME_IDS], labels[k : k + OUTCOME_IDS].tolist()),
        )
    return ours, time.perf_counter() - start


def _monitoring(
    client: httpx.Client,
    window: tuple[datetime, datetime],
    scores: np.ndarray,
    probabilities: np.ndarray,
    labels: np.ndarray,
    fitted_on: np.ndarray,
    size: str,
) -> Row:
    progress("traffic: monitoring?window=1d over them")
    since, until = (moment.isoformat() for moment in window)
    start = time.perf_counter()
    answer = client.get(
        "/v1/calibrators/live/monitoring",
        params={"window": "1d", "since": since, "until": until},
    )
    answer.raise_for_status()
    ours = time.perf_counter() - start
    columns = np.column_stack(
        [
            np.full(scores.size, window[0].timestamp() + 60.0),
            np.ones(scores.size),
            scores,
            probabilities,
            labels,
        ]
    )
    start = time.perf_counter()
    reference = ScoreReference.of_batch(fitted_on, np.zeros(fitted_on.size, dtype=np.int64))
    monitor = Monitor(*window, "1d", {1: reference})
    monitor.add_traffic(columns)
    monitor.rows()
    floor = time.perf_counter() - start
    return Row("traffic", f"monitoring 1d of {size} (HTTP) / in memory", size, ours, floor, "s")


def _refit(client: httpx.Client, scores: np.ndarray, labels: np.ndarray, size: str) -> Row:
    progress("traffic: a Platt fit from the traffic, and of the same pairs posted")
    start = time.perf_counter()
    refit = _post(client, "fit", {"from_traffic": {}, "method": "platt"}).json()
    ours = time.perf_counter() - start
    if refit["n_samples"] != scores.size:
        raise RuntimeError(f"the refit took {refit['n_samples']} pairs")
    start = time.perf_counter()
    _post(client, "fit", {"scores": scores, "labels": labels, "method": "platt"})
    posted = time.perf_counter() - start
    return Row("traffic", f"{size}-pair fit from traffic / posted batch", size, ours, posted, "s")


def _bytes_per_row(db: psycopg.Connection, n: int, size: str) -> Row:
    """The log's bytes per row, labelled (the day partitions with their indexes, and the
    keys), against the same rows in one plain table with the same indexes (the floor)."""
    ours = _scalar(
        db,
        "SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
        "WHERE inhparent = 'predictions'::regclass",
    ) + _scalar(db, "SELECT pg_total_relation_size('prediction_keys')")
    floor = _scalar(db, "SELECT pg_total_relation_size('floor')")
    return Row(
        "traffic",
        f"bytes per labelled row, {size} rows / one table",
        size,
        ours / n,
        floor / n,
        "B",
    )


def _scalar(db: psycopg.Connection, query: str) -> float:
    row = db.execute(query).fetchone()
    return float(row[0]) if row and row[0] is not None else 0.0


def _count(db: psycopg.Connection, table: str) -> int:
    row = db.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


if __name__ == "__main__":
    from bench.table import markdown

    size = int(sys.argv[1]) if len(sys.argv) > 1 else N
    print(markdown(traffic_rows(size, sys.argv[2] if len(sys.argv) > 2 else None)))
