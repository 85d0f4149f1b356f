"""Monitoring from the traffic's hourly rollups (issue 28), on PostgreSQL, the service over HTTP.

``python -m bench.rollups [N] [--predicts M] [--batches B] [--pairs P] [--server URL]`` prints
the rows alone; on a throwaway cluster (:mod:`bench.postgres`), or in databases it creates
(and drops) on the server of ``URL``. Issue 28's targets:

1. **Monitoring flat in rows.** ``GET /v1/calibrators/{name}/monitoring?window=1d`` over 30
   daily windows (``since`` a UTC midnight, ``until`` 30 days on) of a calibrator holding N
   logged predictions (10^7, half labelled) takes at most 0.05 s, and at most 1.2x the same
   request on a calibrator holding N/10 in the same database, with the same spread of times
   and the same versions: each fitted over HTTP (Platt on 2,000 pairs, so they have their
   score bins), v1 answering throughout, v2 a canary answering a fifth of the last 15 days.
   The best of 5 requests after one unmeasured, on ``python -m app.serve``. Beside it, the
   10^7 request against the same monitoring in this process (:meth:`TrafficCases.monitoring
   <app.service.traffic.cases.TrafficCases.monitoring>` on the same database): what HTTP and
   the JSON add. The rows are copied into the log's day partitions by binary ``COPY`` (the
   log's columns, the label and its time on half); their hours are summed by the store's own
   :meth:`~app.store.traffic.rollups.RollupOperations.roll_up`, a day of rows per unit of
   work, as a flush sums its rows (not through HTTP predicts: 10^7 of them take too long),
   and the days are then folded as the servers' upkeep folds them
   (:meth:`~app.service.traffic.log.TrafficLog.fold_days`). The monitoring's
   ``n_predictions`` must sum to N.
2. **Rollup bytes per (version, hour)** after that fill: ``pg_total_relation_size`` of
   ``traffic_rollups`` and of ``traffic_rollup_days`` (the folded days; indexes and TOAST
   included) over the stored hours, at most 4,096, against the average ``pg_column_size`` of
   an hour. Each hour is written once here; a live one is rewritten by every flush, and its
   dead versions wait for autovacuum.
3. **Logging throughput with the rollups on, at least 0.9x without them**: M one-score
   predicts with ids (5,000) from one client, one after another, timed from the first until
   every row is in ``predictions``, and B predicts of 1,000 scores with ids (300) likewise;
   on ``python -m app.serve`` against :mod:`bench.serve_without_rollups` (the same server,
   ``roll_up`` a no-op), each on a fresh database, both up at once: P alternating pairs of
   runs (5), the pair of the median ratio, as :mod:`bench.http` does (a run's last rows wait
   for the log's next flush, up to a second, and the machine is shared). The target bounds
   the time with over the time without: 1/0.9.

The targets are marked at the default sizes only. Every wait is bounded in time; the
databases are dropped after.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import zlib
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np
import orjson
import psycopg
from sqlalchemy.engine import make_url

from app.calibration import DEFAULT_THRESHOLD, RESAMPLES, load_calibrator
from app.service.reporting import DEFAULT_BINS
from app.service.traffic.log import TrafficLog
from app.service.use_cases import CalibrationService
from app.settings import Settings
from app.store import Database, LoggedPrediction
from app.store.traffic.partitions import ensure_partitions
from bench.fits import batch
from bench.http import free_port, running, serve_module
from bench.postgres import cluster
from bench.table import Row, Target, best_seconds, markdown, progress, size_label

N = 10**7
PREDICTS = 5_000
BATCHES = 300
BATCH_SCORES = 1_000
PAIRS = 5
DAYS = 30
SMALLER = 10
"""The reference calibrator holds N / SMALLER predictions."""
REPEAT = 5
CANARY_FROM_DAY, CANARY_SHARE = 15, 0.2
SCORE_MEAN, SCORE_SPREAD = 0.25, 1.0
"""Raw scores; the Platt fits of :func:`bench.fits.batch` map them to log odds near
2 s - 0.5, spread about 2."""
LABELLED = 0.5
MONITORING = Target(0.05)
"""Seconds, at N = 10^7."""
FLAT = Target(1.2)
ROLLUP_BYTES = Target(4096.0)
LOGGING = Target(1 / 0.9)
"""Time with the rollups over time without: throughput at least 0.9x."""
LOAD_SECONDS = 300.0
"""The longest one run of predicts may take."""
WRITTEN_SECONDS = 120.0
"""The longest the log may take to reach the table after a run's last predict."""
RETENTION_DAYS = 90
"""Past the 30 filled days: the service's upkeep must not expire them while it runs."""
COPIED = "name, client_id, version, predicted_at, score, probability, label, labelled_at"
COPIED_TYPES = ["text", "text", "int4", "timestamptz", "float8", "float8", "int4", "timestamptz"]
JSON = {"content-type": "application/json"}
DAY = timedelta(days=1)


def rollup_rows(
    n: int = N,
    predicts: int = PREDICTS,
    batches: int = BATCHES,
    pairs: int = PAIRS,
    server: str | None = None,
) -> list[Row]:
    """Every row, in databases made on ``server`` (a URL of a database there), or by default
    on a throwaway cluster."""
    progress(f"rollups n={n}")
    if server is not None:
        return _rows(n, predicts, batches, pairs, server)
    with cluster() as url:
        return _rows(n, predicts, batches, pairs, url)


def _rows(n: int, predicts: int, batches: int, pairs: int, server: str) -> list[Row]:
    with _databases(server, ("monitoring", "on", "off")) as urls:
        rows = _monitoring_rows(n, urls["monitoring"])
        return rows + _logging_rows(predicts, batches, pairs, urls["on"], urls["off"])


@contextmanager
def _databases(server: str, parts: tuple[str, ...]) -> Iterator[dict[str, str]]:
    """An empty database per part on ``server``'s cluster, their URLs; dropped after."""
    names = {part: f"bench_rollups_{os.getpid()}_{part}" for part in parts}
    url = make_url(server).set(drivername="postgresql+psycopg")
    with psycopg.connect(_dsn(server), autocommit=True) as admin:
        try:
            for name in names.values():
                admin.execute(f'CREATE DATABASE "{name}"')
            yield {
                part: url.set(database=name).render_as_string(hide_password=False)
                for part, name in names.items()
            }
        finally:
            for name in names.values():
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _dsn(url: str) -> str:
    """``url`` as libpq reads it."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _env(url: str, buffer_rows: int = 100_000) -> dict[str, str]:
    """The environment of a service on ``url``, as ``make run`` has it but for the log's
    buffer and retention."""
    return {
        **os.environ,
        "CALIBRATION_DATABASE_URL": url,
        "CALIBRATION_LOG_LEVEL": "warning",
        "CALIBRATION_TRAFFIC_RETENTION_DAYS": str(RETENTION_DAYS),
        "CALIBRATION_TRAFFIC_BUFFER_ROWS": str(buffer_rows),
    }


# -- 1 and 2: monitoring over 30 days of stored hours, and their bytes --------------------------
def _monitoring_rows(n: int, url: str) -> list[Row]:
    small = max(n // SMALLER, 1)
    until = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    since = until - DAYS * DAY
    big, ref = "big", "small"
    with serve_module(_env(url)) as (base, _), httpx.Client(base_url=base, timeout=600) as client:
        database = Database(url, Settings(database_url=url))
        try:
            with database.transaction(write=True) as repo:
                ensure_partitions(repo._session.connection(), since.date(), (until - DAY).date())
            for name, count, seed in ((big, n, 1), (ref, small, 2)):
                calibrators = {v: _fit(client, name, seed=10 * seed + v) for v in (1, 2)}
                progress(f"rollups: {count} predictions of {name!r} copied and rolled up")
                _fill(database, url, name, count, since, calibrators, seed)
            log = TrafficLog(database, capacity=1, flush_rows=1, flush_seconds=1, writer=False)
            log.fold_days(datetime.now(UTC))  # as the servers' upkeep does, every 5 minutes
        finally:
            database.dispose()
        _vacuum(url)
        progress("rollups: monitoring 30x1d over each, best of 5")
        ours = _monitoring_seconds(client, big, since, until, n)
        reference = _monitoring_seconds(client, ref, since, until, small)
    floor = _in_process_seconds(url, big, since, until)
    size = size_label(n)
    per_row, per_data, data = _rollup_bytes(url, (big, ref))
    return [
        Row("rollups", f"monitoring 30x1d (HTTP), {size} / {size_label(small)} predictions",
            size, ours, reference, "s", FLAT if n == N else None),
        Row("rollups", "monitoring 30x1d (HTTP) / the same in process", size, ours, floor, "s",
            MONITORING if n == N else None, True),
        Row("rollups", "rollup bytes per (version, hour), days too / its data's", size, per_row,
            per_data, "B", ROLLUP_BYTES, True),
        Row("rollups", f"data bytes of an hour, {size} / {size_label(small)} predictions", size,
            data[big], data[ref], "B"),
    ]  # fmt: skip


def _fit(client: httpx.Client, name: str, seed: int) -> Any:
    """A small Platt fit over HTTP (a version with its score bins); its calibrator."""
    f, y, _ = batch(2000, tied=False, seed=seed)
    body = {"scores": f, "labels": y.astype(int), "method": "platt"}
    response = client.post(
        f"/v1/calibrators/{name}/fit",
        content=orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY),
        headers=JSON,
    )
    response.raise_for_status()
    fitted = response.json()
    return load_calibrator(fitted["method"], fitted["params"], fitted["fitted"])


def _fill(
    database: Database,
    url: str,
    name: str,
    n: int,
    since: datetime,
    calibrators: dict[int, Any],
    seed: int,
) -> None:
    """``n`` predictions of ``name`` evenly over the 30 days from ``since``, each copied into
    the log's partition and summed into its hour by the store, a day at a time."""
    rng = np.random.default_rng(seed)
    at = np.arange(n) * (DAYS * 86_400e6 / n)  # microseconds from since, the same spread at any n
    canary = (at >= CANARY_FROM_DAY * 86_400e6) & (rng.random(n) < CANARY_SHARE)
    versions = np.where(canary, 2, 1)
    scores = rng.normal(SCORE_MEAN, SCORE_SPREAD, n)
    probabilities = np.empty(n)
    for v, calibrator in calibrators.items():
        probabilities[versions == v] = calibrator.predict(scores[versions == v])
    labels = np.where(
        rng.random(n) < LABELLED, (rng.random(n) < probabilities).astype(np.int64), -1
    )
    ends = np.searchsorted(at, np.arange(1, DAYS + 1) * 86_400e6)
    with psycopg.connect(_dsn(url)) as db:
        first = 0
        for last in ends.tolist():
            part = slice(first, last)
            times = [since + timedelta(microseconds=t) for t in at[part].astype(np.int64).tolist()]
            ids = [f"{name}-{i}" for i in range(first, last)]
            known = [None if y < 0 else y for y in labels[part].tolist()]
            rows = [
                LoggedPrediction(name, i, v, t, s, p)
                for i, v, t, s, p in zip(
                    ids,
                    versions[part].tolist(),
                    times,
                    scores[part].tolist(),
                    probabilities[part].tolist(),
                    strict=True,
                )
            ]
            _copy(db, rows, known)
            with database.transaction(write=True) as repo:
                repo.roll_up(rows, known)
            first = last


def _copy(db: psycopg.Connection, rows: list[LoggedPrediction], labels: list[int | None]) -> None:
    """The rows into ``predictions`` by binary ``COPY``, the labelled ones an hour later."""
    with (
        db.cursor() as cursor,
        cursor.copy(f"COPY predictions ({COPIED}) FROM STDIN (FORMAT binary)") as copy,
    ):
        copy.set_types(COPIED_TYPES)
        later = timedelta(hours=1)
        for row, label in zip(rows, labels, strict=True):
            labelled_at = None if label is None else row.predicted_at + later
            copy.write_row((*row[:6], label, labelled_at))
    db.commit()


def _vacuum(url: str) -> None:
    """What autovacuum would have done by the time the month is read."""
    with psycopg.connect(_dsn(url), autocommit=True) as db:
        db.execute("VACUUM (ANALYZE) traffic_rollups")
        db.execute("VACUUM (ANALYZE) traffic_rollup_days")
        db.execute("ANALYZE predictions")


def _monitoring_seconds(
    client: httpx.Client, name: str, since: datetime, until: datetime, n: int
) -> float:
    """The best of :data:`REPEAT` monitoring requests after one unmeasured, whose windows
    must count the ``n`` predictions."""
    params = {"window": "1d", "since": since.isoformat(), "until": until.isoformat()}
    url = f"/v1/calibrators/{name}/monitoring"
    answer = client.get(url, params=params)
    answer.raise_for_status()
    counted = sum(w["n_predictions"] or 0 for w in answer.json()["windows"])
    if counted != n:
        raise RuntimeError(f"monitoring of {name!r} counted {counted} predictions, not {n}")
    times = []
    for _ in range(REPEAT):
        start = time.perf_counter()
        client.get(url, params=params).raise_for_status()
        times.append(time.perf_counter() - start)
    return min(times)


def _in_process_seconds(url: str, name: str, since: datetime, until: datetime) -> float:
    """The best of :data:`REPEAT` of the service's monitoring in this process, as the route
    asks for it, after one unmeasured."""
    settings = Settings(database_url=url)
    service = CalibrationService(Database(url, settings), settings, worker=True)

    def monitoring() -> object:
        return service.traffic.monitoring(
            name,
            "1d",
            since,
            until,
            n_bins=DEFAULT_BINS,
            resamples=RESAMPLES,
            threshold=DEFAULT_THRESHOLD,
        )

    try:
        return best_seconds(monitoring, REPEAT)
    finally:
        service.close()
        service.database.dispose()


def _rollup_bytes(url: str, names: tuple[str, str]) -> tuple[float, float, dict[str, float]]:
    """The bytes of the hours' table and the days' (indexes and TOAST included) per stored
    hour, an hour's average bytes, and that per calibrator."""
    with psycopg.connect(_dsn(url), autocommit=True) as db:
        total, count, data = db.execute(
            "SELECT pg_total_relation_size('traffic_rollups') "
            "+ pg_total_relation_size('traffic_rollup_days'), count(*), "
            "avg(pg_column_size(data)) FROM traffic_rollups"
        ).fetchone()  # type: ignore[misc]
        each = db.execute(
            "SELECT name, avg(pg_column_size(data)) FROM traffic_rollups "
            "WHERE name = ANY(%s) GROUP BY name",
            (list(names),),
        ).fetchall()
    return float(total) / int(count), float(data), {str(k): float(v) for k, v in each}


# -- 3: logging throughput with the rollups and without -----------------------------------------
@dataclass
class _Mode:
    """One server logging predictions, and what its table should hold."""

    client: httpx.Client
    db: psycopg.Connection
    url: str
    written: int = 0


def _logging_rows(predicts: int, batches: int, pairs: int, on_url: str, off_url: str) -> list[Row]:
    room = predicts + batches * BATCH_SCORES + 10_000  # the step times the writer, not drops
    with ExitStack() as stack:
        modes = {}
        for rollups, url in ((True, on_url), (False, off_url)):
            env = _env(url, room)
            if rollups:
                base, _ = stack.enter_context(serve_module(env))
            else:
                port = free_port()
                env |= {"CALIBRATION_HOST": "127.0.0.1", "CALIBRATION_PORT": str(port)}
                command = [sys.executable, "-m", "bench.serve_without_rollups"]
                base, _ = stack.enter_context(running(command, env, port))
            client = stack.enter_context(httpx.Client(base_url=base, timeout=60))
            db = stack.enter_context(psycopg.connect(_dsn(url), autocommit=True))
            _fit(client, "live", seed=7)
            modes[rollups] = mode = _Mode(client, db, "/v1/calibrators/live/predict")
            _log(mode, _bodies("warm", min(predicts, 200), 1), 1)  # the writer's first flushes
            _log(mode, _bodies("warm-batch", 2, BATCH_SCORES), BATCH_SCORES)
        rows = []
        for label, count, scores, default in (
            ("one-score predicts", predicts, 1, PREDICTS),
            (f"{BATCH_SCORES}-score predicts", batches, BATCH_SCORES, BATCHES),
        ):
            progress(f"rollups: {count} {label} with ids logged, rollups on and off, {pairs}x")
            on, off = _alternating(modes, pairs, count, scores)
            rows.append(
                Row("rollups", f"{label} with ids logged, rollups on / off", str(count), on,
                    off, "s", LOGGING if count == default else None)
            )  # fmt: skip
        for rollups, mode in modes.items():
            _check_rollups(mode.db, rollups)
        return rows


def _alternating(
    modes: dict[bool, _Mode], pairs: int, count: int, scores: int
) -> tuple[float, float]:
    """(on, off) seconds of the pair of runs whose ratio is the median; the first of each
    pair alternates."""
    found = []
    for k in range(pairs):
        seconds = {}
        for rollups in (True, False) if k % 2 == 0 else (False, True):
            bodies = _bodies(f"r{k}-{int(rollups)}-{scores}", count, scores)
            seconds[rollups] = _log(modes[rollups], bodies, scores)
        found.append((seconds[True], seconds[False]))
        progress(f"rollups:   on {seconds[True]:.3f} s, off {seconds[False]:.3f} s")
    return sorted(found, key=lambda pair: pair[0] / pair[1])[pairs // 2]


def _bodies(prefix: str, count: int, scores: int) -> list[tuple[bytes, str]]:
    """``count`` predict bodies of ``scores`` scores with fresh ids, and each one's last id."""
    rng = np.random.default_rng(zlib.crc32(prefix.encode()))
    found = []
    for r in range(count):
        ids = [f"{prefix}-{r}-{i}" for i in range(scores)]
        body = {"scores": rng.normal(SCORE_MEAN, SCORE_SPREAD, scores), "ids": ids}
        found.append((orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY), ids[-1]))
    return found


def _log(mode: _Mode, bodies: list[tuple[bytes, str]], scores: int) -> float:
    """Seconds from the first predict (of ``scores`` scores each) until every row logged is
    in the table."""
    deadline = time.monotonic() + LOAD_SECONDS
    start = time.perf_counter()
    for body, _ in bodies:
        mode.client.post(mode.url, content=body, headers=JSON).raise_for_status()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(bodies)} predicts took over {LOAD_SECONDS:g} s")
    mode.written += len(bodies) * scores
    done = _written(mode, bodies[-1][1])
    return done - start


def _written(mode: _Mode, last_id: str) -> float:
    """When the run's last row, then every row, was in ``predictions`` (perf_counter)."""
    deadline = time.monotonic() + WRITTEN_SECONDS
    query = "SELECT 1 FROM predictions WHERE name = 'live' AND client_id = %s"
    while mode.db.execute(query, (last_id,)).fetchone() is None:
        _bounded(mode, deadline)
        time.sleep(0.01)
    done = time.perf_counter()
    while _count(mode.db) < mode.written:  # a row of the other worker's writer still waits
        _bounded(mode, deadline)
        time.sleep(0.05)
        done = time.perf_counter()
    return done


def _bounded(mode: _Mode, deadline: float) -> None:
    """Raise when the log dropped rows, or took too long."""
    dropped = re.search(
        r"^calibration_traffic_dropped_total (\S+)", mode.client.get("/metrics").text, re.M
    )
    if dropped and float(dropped.group(1)) > 0:
        raise RuntimeError(f"the log dropped {dropped.group(1)} predictions")
    if time.monotonic() > deadline:
        raise RuntimeError(f"the log did not reach the table in {WRITTEN_SECONDS:g} s")


def _count(db: psycopg.Connection) -> int:
    row = db.execute("SELECT count(*) FROM predictions").fetchone()
    return int(row[0]) if row else 0


def _check_rollups(db: psycopg.Connection, rollups: bool) -> None:
    """The server with rollups wrote hours; the one without wrote none (its patch reached
    the workers)."""
    row = db.execute("SELECT count(*) FROM traffic_rollups").fetchone()
    hours = int(row[0]) if row else 0
    if (hours > 0) != rollups:
        raise RuntimeError(f"rollups {'on' if rollups else 'off'}, yet {hours} stored hours")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.rollups", description=__doc__)
    parser.add_argument("n", nargs="?", type=int, default=N, help="predictions monitored")
    parser.add_argument("--predicts", type=int, default=PREDICTS, help="one-score predicts")
    parser.add_argument("--batches", type=int, default=BATCHES, help="1,000-score predicts")
    parser.add_argument("--pairs", type=int, default=PAIRS, help="alternating runs on/off")
    parser.add_argument("--server", help="a database URL on a server to create databases on")
    args = parser.parse_args()
    started = time.monotonic()
    rows = rollup_rows(args.n, args.predicts, args.batches, args.pairs, args.server)
    print(markdown(rows))
    progress(f"rollups bench done in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
