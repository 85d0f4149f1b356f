"""Version numbers: allocated race-free, never reused, and only for complete versions."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import func, select

from app.errors import NotFound
from app.store import Database
from app.store.models import Calibrator, Version, VersionBlob

from .conftest import MakeVersion


def _count(database: Database, table: type[Version] | type[VersionBlob]) -> int:
    with database.engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(table)) or 0)


def _counter(database: Database, name: str) -> int | None:
    with database.engine.connect() as connection:
        return connection.scalar(select(Calibrator.last_version).where(Calibrator.name == name))


def _create(database: Database, make_version: MakeVersion, name: str = "churn") -> int:
    with database.transaction(write=True) as repo:
        return repo.create_version(name, make_version()).version


def _fit_then_fail(database: Database, make_version: MakeVersion, name: str) -> None:
    """Allocate a version, then fail before the transaction commits."""
    with database.transaction(write=True) as repo:
        repo.create_version(name, make_version())
        raise RuntimeError("fit failed later")


def test_concurrent_fits_of_a_new_name_get_numbers_1_to_24(
    database: Database, make_version: MakeVersion
) -> None:
    n_threads = 24
    start = threading.Barrier(n_threads)
    new = make_version()

    def fit(_: int) -> int:
        start.wait()
        with database.transaction(write=True) as repo:
            return repo.create_version("churn", new).version

    with ThreadPoolExecutor(max_workers=n_threads) as pool:
        numbers = list(pool.map(fit, range(n_threads)))

    assert sorted(numbers) == list(range(1, n_threads + 1))
    with database.transaction(write=True) as repo:
        for number in numbers:
            record = repo.get_version("churn", number)
            assert (repo.get_artifact(record.id), repo.get_batch(record.id)) == (
                new.artifact,
                new.batch,
            )
        assert repo.latest_version_number("churn") == n_threads
    assert _count(database, VersionBlob) == n_threads


def test_deleting_the_latest_version_does_not_free_its_number(
    database: Database, make_version: MakeVersion
) -> None:
    assert [_create(database, make_version) for _ in range(2)] == [1, 2]
    with database.transaction(write=True) as repo:
        repo.delete_version("churn", 2)
        assert repo.latest_version_number("churn") == 1
    assert _create(database, make_version) == 3


def test_recreating_a_deleted_calibrator_continues_its_numbering(
    database: Database, make_version: MakeVersion
) -> None:
    _create(database, make_version)
    _create(database, make_version)
    with database.transaction(write=True) as repo:
        repo.delete_calibrator("churn")
    with database.transaction(write=True) as repo, pytest.raises(NotFound):
        repo.get_version("churn", 1)

    assert _create(database, make_version) == 3
    with database.transaction(write=True) as repo:
        summary, versions, total = repo.get_calibrator("churn", limit=10, offset=0)
    assert (summary.latest_version, summary.n_versions, total) == (3, 1, 1)
    assert [v.version for v in versions] == [3]


def test_a_failed_transaction_stores_nothing_and_keeps_the_counter(
    database: Database, make_version: MakeVersion
) -> None:
    _create(database, make_version)

    with pytest.raises(RuntimeError, match="fit failed later"):
        _fit_then_fail(database, make_version, "churn")

    assert (_count(database, Version), _count(database, VersionBlob)) == (1, 1)
    assert _counter(database, "churn") == 1
    assert _create(database, make_version) == 2


def test_a_failed_first_fit_leaves_no_calibrator(
    database: Database, make_version: MakeVersion
) -> None:
    with pytest.raises(RuntimeError, match="fit failed later"):
        _fit_then_fail(database, make_version, "fresh")

    assert _counter(database, "fresh") is None
    with database.transaction(write=True) as repo:
        assert repo.list_calibrators(limit=10, offset=0) == ([], 0)
        with pytest.raises(NotFound, match="calibrator 'fresh' not found"):
            repo.get_version("fresh", "latest")
