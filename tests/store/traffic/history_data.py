"""Traffic of past days for the traffic history's tests, logged through the store: a binary
calibrator (``churn``, two versions) and a k-class one (``flowers``, k = 3), on two days the
export takes (12 and 10 days ago, with 7 hot days) and one it leaves (2 days ago), some
rows labelled; and what the tests compare: the rows as the database holds them, the files
as the bucket holds them, and every read of the store over a range."""

from __future__ import annotations

import tempfile
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import text

from app.settings import Settings
from app.store import Database, LoggedPrediction, Repository
from app.store.traffic.partitions import ensure_partitions
from tests.store.conftest import MakeVersion

NOW = datetime.now(UTC)
TODAY = NOW.date()
OLD = (TODAY - timedelta(days=12), TODAY - timedelta(days=10))
HOT = TODAY - timedelta(days=2)
NAMES = ("churn", "flowers")


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def history_settings(database: Database, **more: Any) -> Settings:
    """The settings of ``database`` (its URL and bucket) with ``more``."""
    assert database.objects is not None
    location = database.objects.location
    endpoint = database.objects._client.meta.endpoint_url
    return Settings(
        database_url=database.engine.url.render_as_string(hide_password=False),
        blob_url=f"s3://{location.bucket}/{location.prefix}",
        blob_endpoint_url=endpoint,
        **more,
    )


def log_history(database: Database, make_version: MakeVersion, rows: int = 40) -> None:
    """``rows`` predictions of churn and half as many of flowers on each of :data:`OLD` and
    :data:`HOT`, three in four labelled, each at its own microsecond; PostgreSQL gives the
    days their partitions first (as the log's upkeep would have, those days), but the first,
    whose rows stay in the default partition (as when the upkeep was down)."""
    rng = np.random.default_rng(28)
    logged: list[LoggedPrediction] = []
    outcomes: dict[str, list[tuple[str, int]]] = {name: [] for name in NAMES}
    for day in (*OLD, HOT):
        start = midnight(day)
        for i in range(rows):
            at = start + timedelta(seconds=1000 * i + 1, microseconds=7919 * i)
            score = float(rng.normal())
            logged.append(
                LoggedPrediction(
                    "churn", f"c{day}-{i}", 1 + i % 2, at, score, float(1 / (1 + np.exp(-score)))
                )
            )
            if i % 4:
                outcomes["churn"].append((f"c{day}-{i}", int(rng.random() < 0.4)))
            if i % 2:
                continue
            raw = rng.normal(size=3)
            answered = np.exp(raw) / np.exp(raw).sum()
            logged.append(
                LoggedPrediction(
                    "flowers",
                    f"f{day}-{i}",
                    1,
                    at + timedelta(microseconds=3),
                    scores_row=raw.astype("<f8").tobytes(),
                    probabilities_row=answered.astype("<f8").tobytes(),
                )
            )
            if i % 3:
                outcomes["flowers"].append((f"f{day}-{i}", int(rng.integers(0, 3))))
    with database.transaction(write=True) as repo:
        if database.engine.dialect.name == "postgresql":  # OLD[0]'s rows: in the default
            for day in (OLD[1], HOT):
                ensure_partitions(repo._session.connection(), day, day)
        repo.create_version("churn", make_version())
        repo.create_version("churn", make_version())
        repo.create_version("flowers", make_version(n_classes=3, n_positive=None))
        repo.log_predictions(logged)
    with database.transaction(write=True) as repo:
        for name, labelled in outcomes.items():
            repo.record_outcomes(name, labelled, NOW - timedelta(days=9))


COLUMNS = (
    "client_id, version, predicted_at, score, probability, scores_row, probabilities_row, "
    "label, labelled_at"
)


def database_rows(database: Database, name: str, day: date) -> list[tuple[Any, ...]]:
    """``name``'s rows of ``day`` in the database, as a file's rows read back as Python."""
    with database.transaction() as repo:
        found = repo._session.execute(
            text(
                f"SELECT {COLUMNS} FROM predictions WHERE name = :name "
                "AND predicted_at >= :start AND predicted_at < :end ORDER BY client_id"
            ),
            {"name": name, **_bounds(database, day)},
        )
        return [_python(row) for row in found]


def count_rows(database: Database, day: date) -> int:
    """The rows of ``day`` in the database, every calibrator's."""
    with database.transaction() as repo:
        found = repo._session.execute(
            text(
                "SELECT count(*) FROM predictions "
                "WHERE predicted_at >= :start AND predicted_at < :end"
            ),
            _bounds(database, day),
        )
        return int(found.scalar_one())


def file_table(database: Database, name: str, day: date) -> pa.Table:
    """The exported file of ``name``'s ``day``, from the bucket."""
    objects = database.objects
    assert objects is not None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "day.parquet"
        objects.download_file(objects.location.history_key(name, day), path)
        return pq.read_table(path)


def file_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """A file's rows as Python, in client id order."""
    rows = [
        tuple(
            _bytes(value) if isinstance(value, list) else value
            for value in (row[c] for c in table.column_names)
        )
        for row in table.to_pylist()
    ]
    return sorted(rows, key=lambda row: row[0])


def reads(repo: Repository, since: datetime, until: datetime) -> dict[str, Any]:
    """The store's reads over [since, until) (each kind, with and without a version), as
    plain arrays to compare."""
    seen: dict[str, Any] = {}
    for version, labelled in ((None, False), (1, True)):
        seen[f"counts {version}"] = repo.traffic_counts("churn", since, until, version)
        chunks = list(repo.traffic_chunks("churn", since, until, version, labelled=labelled))
        seen[f"chunks {version}"] = np.concatenate([np.empty((0, 5)), *chunks])
    for version in (None, 2):
        pooled = repo.labelled_traffic("churn", since, until, version, max_rows=10**6)
        seen[f"pairs {version}"] = (pooled.scores, pooled.labels, pooled.counts)
    seen["columns"] = repo.labelled_columns("churn", since, until, None, max_rows=10**6)
    seen["flowers counts"] = repo.traffic_counts("flowers", None, until)
    classes = [
        (r.seconds, r.probabilities, r.labels)
        for _, r in repo.class_row_chunks("flowers", since, until)
    ]
    seen["flowers rows"] = [np.concatenate(column) for column in zip(*classes, strict=True)]
    k_class = repo.labelled_traffic("flowers", since, until, max_rows=10**6)
    seen["flowers fit"] = (k_class.score_rows, k_class.row_labels, k_class.counts)
    seen["flowers labelled"] = repo.labelled_class_rows("flowers", since, until, None)
    return seen


def assert_same(before: Any, after: Any) -> None:
    """Equal reads: arrays exactly (NaN where NaN), the rest by ``==``."""
    if isinstance(before, dict):
        assert before.keys() == after.keys()
        for key in before:
            assert_same(before[key], after[key])
    elif isinstance(before, list | tuple):
        assert len(before) == len(after)
        for one, other in zip(before, after, strict=True):
            assert_same(one, other)
    elif isinstance(before, np.ndarray):
        assert before.shape == after.shape
        np.testing.assert_array_equal(before, after)
    else:
        assert before == after


def _bounds(database: Database, day: date) -> dict[str, Any]:
    start, end = midnight(day), midnight(day + timedelta(days=1))
    if database.engine.dialect.name == "postgresql":
        return {"start": start, "end": end}
    return {
        "start": start.replace(tzinfo=None).isoformat(" "),
        "end": end.replace(tzinfo=None).isoformat(" "),
    }


def _python(row: Any) -> tuple[Any, ...]:
    values = list(row)
    for i in (2, 8):  # SQLite answers times as text
        if isinstance(values[i], str):
            values[i] = datetime.fromisoformat(values[i]).replace(tzinfo=UTC)
    for i in (5, 6):
        values[i] = None if values[i] is None else bytes(values[i])
    return tuple(values)


def _bytes(values: list[float]) -> bytes:
    return np.asarray(values, dtype="<f8").tobytes()
