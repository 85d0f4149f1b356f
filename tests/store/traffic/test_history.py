"""The traffic history (``python -m app.store.history``) on both databases, against moto's S3
server: old days leave the database for Parquet files that hold exactly their rows, reads
over a range reaching them answer as before, an outcome that comes while a day is exported
is not lost, files past the retention go, two runs at once do the work once, and a missing
or altered file is a 503."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from typing import Any

import pytest

from app.errors import ObjectStoreUnavailable
from app.store import Database
from app.store import history as history_module
from app.store.collect import collect_blobs
from app.store.history import run_history
from app.store.traffic.partitions import partition_days
from tests.objects import s3_client
from tests.store.conftest import MakeVersion

from .history_data import (
    HOT,
    NOW,
    OLD,
    assert_same,
    count_rows,
    database_rows,
    file_rows,
    file_table,
    history_settings,
    log_history,
    midnight,
    reads,
)


@pytest.fixture
def blobs() -> str:
    """Object storage only."""
    return "s3"


@pytest.fixture
def logged(database: Database, make_version: MakeVersion) -> Database:
    log_history(database, make_version)
    return database


RANGES = [
    (midnight(OLD[0]) - timedelta(days=1), NOW + timedelta(hours=1)),  # everything
    (midnight(OLD[1]) + timedelta(hours=12), midnight(HOT) + timedelta(hours=6)),  # partial days
]


def test_old_days_go_to_parquet_and_every_read_answers_as_before(
    logged: Database, backend: str
) -> None:
    database = logged
    rows = {
        (name, day): database_rows(database, name, day)
        for name in ("churn", "flowers")
        for day in OLD
    }
    with database.transaction() as repo:
        before = [reads(repo, *bounds) for bounds in RANGES]
    run = run_history(database, history_settings(database), NOW)
    assert (run.exported, run.rows, run.cleared) == (4, 2 * (40 + 20), 4)
    assert [count_rows(database, day) for day in (*OLD, HOT)] == [0, 0, 60]
    if backend == "postgres":  # OLD[1]'s partition dropped, OLD[0]'s rows in the default gone
        with database.transaction() as repo:
            days = partition_days(repo._session.connection())
        assert HOT in days
        assert not set(OLD) & set(days)
    for (name, day), held in rows.items():
        table = file_table(database, name, day)
        assert str(table.schema.field("predicted_at").type) == "timestamp[us, tz=UTC]"
        assert str(table.schema.field("scores_row").type) == "list<element: double>"
        assert file_rows(table) == held
    with database.transaction() as repo:
        record = repo.exported_day("churn", OLD[0])
        after = [reads(repo, *bounds) for bounds in RANGES]
    assert_same(before, after)
    assert record is not None
    assert (record.rows, record.labelled, record.counts) == (40, 30, {"1": [20, 10], "2": [20, 20]})
    assert record.object_key == (
        f"calibration/history/calibrator=churn/date={OLD[0]:%Y-%m-%d}/predictions.parquet"
    )
    again = run_history(database, history_settings(database), NOW)
    assert (again.exported, again.cleared, again.deleted) == (0, 0, 0)
    assert collect_blobs(database, grace=timedelta(seconds=-1)) == 0  # blobs/ only
    assert file_table(database, "churn", OLD[0]).num_rows == 40


@pytest.mark.parametrize("moment", ["read", "drop"])
def test_an_outcome_posted_while_a_day_is_exported_is_in_its_file(
    logged: Database, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, moment: str
) -> None:
    """An outcome labels a row of an exported day between the file's read and its record
    (``read``), or between the record and the rows' drop (``drop``: PostgreSQL's partition,
    SQLite's second batch of deletes, once the first is gone): it is in the file in the end."""
    database = logged
    late = f"c{OLD[0]}-36"  # unlabelled (i % 4 == 0), in the last batch of 7

    def post() -> None:
        with database.transaction(write=True) as repo:
            assert repo.record_outcomes("churn", [(late, 1)], NOW).matched == 1

    once = iter([True])
    said = "changed while it was exported"
    if moment == "read":
        real_write = history_module.write_day

        def write_then_post(chunks: Any, path: Any) -> Any:
            written = real_write(chunks, path)
            if next(once, False):
                post()
            return written

        monkeypatch.setattr(history_module, "write_day", write_then_post)
    elif database.engine.dialect.name == "postgresql":
        real_wait = history_module._older_ended

        def wait_then_post(db: Database) -> bool:
            if next(once, False):
                post()
            return real_wait(db)

        monkeypatch.setattr(history_module, "_older_ended", wait_then_post)
        said = "changed after its export"
    else:
        said = "came after its export"
        monkeypatch.setattr(history_module, "DELETE_ROWS", 7)
        real_delete = history_module._delete_batch
        calls = iter(range(100))

        def delete_then_post(db: Database, record: Any) -> Any:
            if next(calls) == 1 and next(once, False):  # churn's first day: one batch gone
                post()
            return real_delete(db, record)

        monkeypatch.setattr(history_module, "_delete_batch", delete_then_post)
    with caplog.at_level(logging.INFO, logger="app.store.history"):
        run = run_history(database, history_settings(database), NOW)
    assert run.cleared == 4
    assert said in caplog.text
    table = file_table(database, "churn", OLD[0])
    assert (
        dict(zip(table["client_id"].to_pylist(), table["label"].to_pylist(), strict=True))[late]
        == 1
    )
    assert count_rows(database, OLD[0]) == 0
    with database.transaction() as repo:
        record = repo.exported_day("churn", OLD[0])
        assert record is not None
        assert (record.labelled, record.counts["1"]) == (31, [20, 11])
        assert repo.traffic_counts("churn", None, NOW, 1) == {1: (60, 31)}


def test_files_past_the_retention_go_and_so_do_those_no_record_names(
    logged: Database, make_version: MakeVersion
) -> None:
    database = logged
    settings = history_settings(database, traffic_retention_days=30)
    run_history(database, settings, NOW)
    objects = database.objects
    assert objects is not None
    stray = objects.location.history + "calibrator=gone/date=2026-01-01/predictions.parquet"
    s3_client(objects._client.meta.endpoint_url).put_object(
        Bucket=objects.location.bucket, Key=stray, Body=b"an upload never recorded"
    )
    with database.transaction(write=True) as repo:
        repo.delete_calibrator("flowers")
    # 19 days on: OLD[0] is past the retention, HOT is due (flowers' went with flowers)
    later = run_history(database, settings, NOW + timedelta(days=19))
    assert later.deleted == 4  # the stray file, flowers' two days, churn's first
    assert (later.exported, later.cleared) == (1, 1)
    keys = {key for key, _ in objects.listed(objects.location.history)}
    assert keys == {
        f"calibrator=churn/date={day:%Y-%m-%d}/predictions.parquet" for day in (OLD[1], HOT)
    }
    with database.transaction() as repo:
        assert repo.exported_day("churn", OLD[0]) is None


def test_two_runs_at_once_do_the_work_once(logged: Database) -> None:
    database = logged
    settings = history_settings(database)
    second: list[Any] = []
    real_write = history_module.write_day

    def write_while_another_starts(chunks: Any, path: Any) -> Any:
        if not second:
            other = threading.Thread(
                target=lambda: second.append(run_history(database, settings, NOW))
            )
            other.start()
            other.join(30)
        return real_write(chunks, path)

    history_module_write = pytest.MonkeyPatch()
    history_module_write.setattr(history_module, "write_day", write_while_another_starts)
    try:
        first = run_history(database, settings, NOW)
    finally:
        history_module_write.undo()
    assert second[0].skipped
    assert (first.exported, first.cleared) == (4, 4)
    assert count_rows(database, OLD[0]) == 0


def test_a_missing_or_altered_file_is_a_503_naming_it(logged: Database) -> None:
    database = logged
    run_history(database, history_settings(database), NOW)
    objects = database.objects
    assert objects is not None
    missing, altered = (objects.location.history_key(n, OLD[1]) for n in ("churn", "flowers"))
    client = s3_client(objects._client.meta.endpoint_url)
    client.delete_object(Bucket=objects.location.bucket, Key=missing)
    client.put_object(Bucket=objects.location.bucket, Key=altered, Body=b"PAR1 not a day")
    since = midnight(OLD[1]) + timedelta(hours=1)
    for name, key, said in (
        ("churn", missing, "is missing"),
        ("flowers", altered, "fails its sha256 check"),
    ):
        with database.transaction() as repo, pytest.raises(ObjectStoreUnavailable) as raised:
            list(repo.traffic_chunks(name, since, NOW))
        assert key in raised.value.detail
        assert said in raised.value.detail
    with database.transaction() as repo:  # whole days counted from the record, no file read
        assert repo.traffic_counts("churn", midnight(OLD[1]), midnight(HOT))[1] == (20, 10)
