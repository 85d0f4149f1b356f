"""docs/operations.md's one-line queries of the traffic history, as written, against files the
export wrote (SQLite; the files are the same on PostgreSQL): pandas' against the tests' S3
server, DuckDB's against a copy downloaded to a temporary folder (its ``httpfs`` extension is
downloaded on first use, which an offline machine cannot). Both find the rows the database
held, and ``python -m app.store.history`` says what it did."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from app.settings import get_settings
from app.store import Database
from app.store import history as history_module
from tests.store.conftest import make_version
from tests.store.traffic.history_data import OLD, log_history, midnight

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED = "s3://calibration/blobs/"
"""The bucket and prefix the page's lines name."""

__all__ = ["make_version"]  # a fixture, by import


@pytest.fixture
def blobs() -> str:
    """Object storage only."""
    return "s3"


@pytest.fixture
def backend() -> str:
    """SQLite only."""
    return "sqlite"


def documented(start: str) -> str:
    """The line of docs/operations.md's traffic history that starts with ``start``."""
    page = (ROOT / "docs" / "operations.md").read_text()
    section = page[page.index("## Traffic history") :]
    found = re.search(rf"^\s*({re.escape(start)}.*)$", section, re.MULTILINE)
    assert found is not None, start
    return found.group(1)


def test_the_documented_queries_read_the_exported_days(
    database: Database,
    database_url: str,
    blob_settings: dict[str, Any],
    make_version: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    log_history(database, make_version)
    with database.transaction() as repo:
        expected = {
            (name, day): repo.traffic_counts(name, midnight(day), midnight(day) + timedelta(1))
            for name in ("churn", "flowers")
            for day in OLD
        }
    monkeypatch.setenv("CALIBRATION_DATABASE_URL", database_url)
    for key, value in blob_settings.items():
        monkeypatch.setenv(f"CALIBRATION_{key.upper()}", value)
    get_settings.cache_clear()
    try:
        history_module.main([])
    finally:
        get_settings.cache_clear()
    assert capsys.readouterr().out.strip() == (
        "exported 4 calibrator-days (120 rows), cleared 4 from the database, "
        "deleted 0 history files"
    )
    objects = database.objects
    assert objects is not None
    bucket = f"s3://{objects.location.bucket}/{objects.location.prefix}/"

    monkeypatch.setenv("AWS_ENDPOINT_URL", blob_settings["blob_endpoint_url"])
    line = documented("pd.read_parquet(").replace(DOCUMENTED, bucket)
    frame = eval(line, {"pd": pd})  # the page's line, as written but for the bucket
    assert len(frame) == 80
    assert set(frame["version"]) == {1, 2}
    assert frame["label"].notna().sum() == 60

    for key, _ in objects.listed(objects.location.history):
        local = tmp_path / "history" / key
        local.parent.mkdir(parents=True, exist_ok=True)
        objects.download_file(objects.location.history + key, local)
    local_query = documented("SELECT").replace(DOCUMENTED, f"{tmp_path}/")
    found = duckdb.sql(local_query).fetchall()
    counted: dict[tuple[str, Any], dict[int, tuple[int, int]]] = {}
    for name, day, version, predictions, labelled, _ in found:
        counted.setdefault((name, day), {})[version] = (predictions, labelled)
    assert counted == expected
    rates = {(name, version): rate for name, _, version, _, _, rate in found if name == "flowers"}
    assert all(0 <= rate <= 2 for rate in rates.values())  # its labels are classes 0..2
