"""The hand-written migrations: up, down, up again, and agreement with the models."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from app.settings import get_settings
from app.store.migrate import downgrade, main, upgrade
from app.store.models import Base

TABLES = {"calibrators", "versions", "version_blobs", "aliases"}


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
            differences = compare_metadata(MigrationContext.configure(connection), Base.metadata)
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
