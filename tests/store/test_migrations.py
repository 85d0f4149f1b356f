"""The hand-written migrations: up, down, up again, and agreement with the models."""

from __future__ import annotations

import json
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Connection, create_engine, inspect, text

from app.calibration import ScoreReference
from app.settings import Settings, get_settings
from app.store import AliasMoved, Database, encode_batch
from app.store.engines import SQLITE_BEGIN, make_engine
from app.store.migrate import downgrade, main, upgrade
from app.store.models import Base
from app.store.traffic.partitions import not_a_partition

TABLES = {"calibrators", "versions", "version_blobs", "aliases", "predictions", "pending_outcomes"}


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(empty_database_url: str) -> None:
    upgrade(empty_database_url)
    assert _tables(empty_database_url) >= TABLES

    downgrade(empty_database_url)
    assert not _tables(empty_database_url) & TABLES

    upgrade(empty_database_url)
    assert _tables(empty_database_url) >= TABLES


def test_models_agree_with_the_migrated_schema(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            context = MigrationContext.configure(
                connection, opts={"include_object": not_a_partition}
            )
            differences = compare_metadata(context, Base.metadata)
    finally:
        engine.dispose()
    assert differences == []


def test_command_line_upgrades_the_configured_database(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path}/nested/dir/service.db"
    monkeypatch.setenv("CALIBRATION_DATABASE_URL", url)
    get_settings.cache_clear()
    try:
        main([])
    finally:
        get_settings.cache_clear()
    assert _tables(url) >= TABLES


def insert_calibrator(connection: Connection, versions: int) -> None:
    """Calibrator 1, ``old``, with ``versions`` binary versions numbered from 1 (row ids 100
    past their numbers, so that a migration taking one for the other shows), as a schema of
    before the models' current columns holds them."""
    connection.execute(
        text(
            "INSERT INTO calibrators (id, name, created_at, updated_at, last_version) "
            "VALUES (1, 'old', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, :n)"
        ),
        {"n": versions},
    )
    for number in range(1, versions + 1):
        connection.execute(
            text(
                "INSERT INTO versions (id, calibrator_id, version, method, params, n_samples, "
                "n_positive, n_classes, created_at, description, tags, metrics, "
                "artifact_sha256, artifact_bytes) VALUES (:id, 1, :n, 'platt', '{}', 10, 3, 2, "
                "CURRENT_TIMESTAMP, '', '{}', '{}', 'x', 1)"
            ),
            {"id": 100 + number, "n": number},
        )


def test_0002_backfills_class_counts_of_binary_versions(empty_database_url: str) -> None:
    upgrade(empty_database_url, "0001")
    engine = create_engine(empty_database_url)
    try:
        with engine.begin() as connection:
            insert_calibrator(connection, 1)
        upgrade(empty_database_url, "0002")
        with engine.connect() as connection:
            counts = connection.execute(text("SELECT class_counts FROM versions")).scalar_one()
        assert (counts if isinstance(counts, list) else json.loads(counts)) == [7, 3]
        downgrade(empty_database_url, "0001")
        upgrade(empty_database_url)
    finally:
        engine.dispose()


def test_0008_starts_each_existing_alias_with_its_one_known_move(empty_database_url: str) -> None:
    upgrade(empty_database_url, "0007")
    engine = create_engine(empty_database_url)
    try:
        with engine.begin() as connection:
            insert_calibrator(connection, 2)
            connection.execute(
                text(
                    "INSERT INTO aliases (calibrator_id, name, version_id, updated_at) "
                    "VALUES (1, 'production', 102, '2026-01-02 03:04:05+00:00')"
                )
            )
        upgrade(empty_database_url, "0008")
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT alias, from_version, to_version FROM alias_moves")
            ).all()
        assert [tuple(row) for row in rows] == [("production", None, 2)]
        upgrade(empty_database_url)
        database = Database(empty_database_url, Settings(database_url=empty_database_url))
        try:
            with database.transaction() as repo:
                (move,) = repo.alias_moves("old", 5)
        finally:
            database.dispose()
        assert move == AliasMoved("production", None, 2, datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
        downgrade(empty_database_url, "0007")
        upgrade(empty_database_url)
    finally:
        engine.dispose()


def test_a_migrated_sqlite_file_is_in_wal_mode_before_anything_serves_it(tmp_path: Path) -> None:
    """Switching a file to WAL needs it to itself: the first connections of a file migrated in
    rollback-journal mode raced to switch it, and SQLite refused some at once ("database is
    locked", a 503 to the first fits of a fresh service). A plain connection, which asks for
    no mode, finds WAL; and 16 service connections writing at once from a barrier all commit."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    upgrade(url)
    plain = sqlite3.connect(tmp_path / "fresh.db")
    try:
        assert plain.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        plain.close()
    engine = make_engine(url, get_settings())
    barrier = threading.Barrier(16)

    def write(i: int) -> None:
        barrier.wait(timeout=30)
        with engine.connect() as connection:
            writer = connection.execution_options(**{SQLITE_BEGIN: "IMMEDIATE"})
            with writer.begin():
                writer.exec_driver_sql("CREATE TABLE IF NOT EXISTS probe (i INTEGER)")
                writer.exec_driver_sql(f"INSERT INTO probe VALUES ({i})")

    try:
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(write, range(16)))
        with engine.connect() as connection:
            assert connection.exec_driver_sql("SELECT count(*) FROM probe").scalar() == 16
    finally:
        engine.dispose()


@pytest.mark.parametrize("logged", [False, True])
def test_0010_makes_the_score_bins_and_starts_the_rollups(
    empty_database_url: str, logged: bool
) -> None:
    """Each binary version whose batch is in the database gets its score bins from it. A
    database without traffic has every hour in the rollups; one with logged predictions from
    the hour after the upgrade (monitoring reads the rows before it)."""
    upgrade(empty_database_url, "0009")
    engine = create_engine(empty_database_url)
    try:
        scores = np.linspace(-2.0, 3.0, 50)
        labels = (np.arange(50) % 3 == 0).astype(np.int64)
        with engine.begin() as connection:
            insert_calibrator(connection, 1)
            connection.execute(
                text(
                    "INSERT INTO version_blobs (version_id, artifact, batch) "
                    "VALUES (101, :artifact, :batch)"
                ),
                {"artifact": b"{}", "batch": encode_batch(scores, labels, np.ones(50), scores)},
            )
        if logged:
            with engine.begin() as connection:
                connection.execute(
                    text(
                        "INSERT INTO predictions (name, client_id, version, predicted_at) "
                        "VALUES ('churn', 'a', 1, '2026-01-02 03:04:05+00:00')"
                    )
                )
        before = datetime.now(UTC)
        upgrade(empty_database_url)
        database = Database(empty_database_url, Settings(database_url=empty_database_url))
        try:
            with database.transaction() as repo:
                start = repo.rollup_start()
                (reference,) = repo.score_references("old", [1]).values()
        finally:
            database.dispose()
        expected = ScoreReference.of_batch(scores, labels)  # made from the stored batch
        assert reference is not None
        assert reference.to_bytes() == expected.to_bytes()
        if logged:
            hour = before.replace(minute=0, second=0, microsecond=0)
            assert start in (hour + timedelta(hours=1), hour + timedelta(hours=2))  # a tick
        else:
            assert start == datetime(1970, 1, 1, tzinfo=UTC)
        downgrade(empty_database_url, "0009")
        upgrade(empty_database_url)
    finally:
        engine.dispose()
