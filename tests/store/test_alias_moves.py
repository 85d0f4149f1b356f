"""The record of aliases' moves: what each set, move and removal leaves, in order, and that a
refused change leaves nothing (migration 0008's start of the record: test_migrations.py)."""

from __future__ import annotations

import pytest

from app.errors import Conflict, NotFound
from app.store import Database

from .conftest import MakeVersion
from .races import race


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


def _chain_is_serial(database: Database, name: str) -> None:
    """Each alias's moves follow on: every ``before`` is the previous ``after``, and the last
    ``after`` is where the alias points now (or it is gone)."""
    with database.transaction() as repo:
        moves = list(reversed(repo.alias_moves(name, 100)))
        now = repo.calibrator_aliases(name)
    last: dict[str, int | None] = {}
    for move in moves:
        assert move.before == last.get(move.alias), moves
        last[move.alias] = move.after
    assert {a: v for a, v in last.items() if v is not None} == now


def test_two_moves_of_one_alias_at_once_record_a_serial_chain(
    database: Database, make_version: MakeVersion
) -> None:
    _calibrator(database, make_version, "churn", 3)
    with database.transaction(write=True) as repo:
        repo.set_alias("churn", "production", 1)
    outcome = race(
        database,
        lambda repo: repo.set_alias("churn", "production", 2),
        lambda repo: repo.set_alias("churn", "production", 3),
    )
    assert outcome is None
    assert _moves(database, "churn") == [
        ("production", 2, 3),
        ("production", 1, 2),
        ("production", None, 1),
    ]
    _chain_is_serial(database, "churn")


def test_a_move_racing_a_forced_delete_of_its_target_records_a_serial_chain(
    database: Database, make_version: MakeVersion
) -> None:
    _calibrator(database, make_version, "churn", 2)
    with database.transaction(write=True) as repo:
        repo.set_alias("churn", "production", 1)
    outcome = race(  # the delete first, then the move finds no alias but sets one
        database,
        lambda repo: repo.delete_version("churn", 1, force=True),
        lambda repo: repo.set_alias("churn", "production", 2),
    )
    assert outcome is None
    assert _moves(database, "churn") == [
        ("production", None, 2),
        ("production", 1, None),
        ("production", None, 1),
    ]
    _chain_is_serial(database, "churn")
    outcome = race(  # the move first, then the delete of its old target takes no alias
        database,
        lambda repo: repo.set_alias("churn", "candidate", 2),
        lambda repo: repo.delete_version("churn", 2, force=True),
    )
    assert outcome is None
    _chain_is_serial(database, "churn")
    assert _moves(database, "churn")[:2] == [("production", 2, None), ("candidate", 2, None)]
