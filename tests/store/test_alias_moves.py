"""The record of aliases' moves: what each set, move and removal leaves, in order, and that a
refused change leaves nothing (migration 0008's start of the record: test_migrations.py)."""

from __future__ import annotations

import pytest

from app.errors import Conflict, NotFound
from app.store import Database

from .conftest import MakeVersion


def _moves(
    database: Database, name: str, limit: int = 50
) -> list[tuple[str, int | None, int | None]]:
    with database.transaction() as repo:
        return [(m.alias, m.before, m.after) for m in repo.alias_moves(name, limit)]


def _calibrator(database: Database, make_version: MakeVersion, name: str, versions: int) -> None:
    with database.transaction(write=True) as repo:
        for _ in range(versions):
            repo.create_version(name, make_version())


def test_each_change_is_recorded_newest_first(
    database: Database, make_version: MakeVersion
) -> None:
    _calibrator(database, make_version, "churn", 3)
    with database.transaction(write=True) as repo:
        repo.set_alias("churn", "production", 1)
        repo.set_alias("churn", "candidate", 2)
    with database.transaction(write=True) as repo:
        repo.set_alias("churn", "production", 2)
        repo.set_alias("churn", "production", 2)  # where it is already: no move
        repo.delete_alias("churn", "candidate")
        repo.set_alias("churn", "production", 3)
    with database.transaction(write=True) as repo:
        repo.delete_version("churn", 3, force=True)  # takes production with it
    assert _moves(database, "churn") == [
        ("production", 3, None),
        ("production", 2, 3),
        ("candidate", 2, None),
        ("production", 1, 2),
        ("candidate", None, 2),
        ("production", None, 1),
    ]
    assert _moves(database, "churn", limit=2) == _moves(database, "churn")[:2]
    with database.transaction() as repo:
        times = [m.at for m in repo.alias_moves("churn", 50)]
    assert times == sorted(times, reverse=True)


def test_a_refused_change_records_nothing(database: Database, make_version: MakeVersion) -> None:
    _calibrator(database, make_version, "churn", 1)
    with database.transaction(write=True) as repo:
        repo.set_alias("churn", "production", 1)
    with database.transaction(write=True) as repo, pytest.raises(NotFound):
        repo.set_alias("churn", "production", 7)
    with database.transaction(write=True) as repo, pytest.raises(NotFound):
        repo.delete_alias("churn", "candidate")
    with database.transaction(write=True) as repo, pytest.raises(Conflict):
        repo.delete_version("churn", 1)
    assert _moves(database, "churn") == [("production", None, 1)]


def test_a_calibrator_made_again_under_its_name_starts_without_the_old_moves(
    database: Database, make_version: MakeVersion
) -> None:
    _calibrator(database, make_version, "churn", 1)
    with database.transaction(write=True) as repo:
        repo.set_alias("churn", "production", 1)
        repo.delete_calibrator("churn")
    _calibrator(database, make_version, "churn", 1)
    assert _moves(database, "churn") == []
    with database.transaction() as repo, pytest.raises(NotFound):
        repo.alias_moves("nope", 5)
