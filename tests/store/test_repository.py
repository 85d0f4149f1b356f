"""Reading, listing and deleting: what a client of the API sees of the store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.errors import Conflict, NotFound
from app.store import Database, decode_artifact, decode_batch, encode_batch

from .conftest import MakeVersion


def _fill(database: Database, make_version: MakeVersion, spec: dict[str, list[str]]) -> None:
    """Create, for each name, one version per listed method (in order)."""
    with database.transaction(write=True) as repo:
        for name, methods in spec.items():
            for method in methods:
                repo.create_version(name, make_version(method))


def test_get_version_by_number_latest_and_alias(
    database: Database, make_version: MakeVersion
) -> None:
    _fill(database, make_version, {"churn": ["platt", "isotonic", "beta"]})
    with database.transaction(write=True) as repo:
        assert repo.get_version("churn", "latest").version == 3
        assert repo.get_version("churn", 2).method == "isotonic"
        repo.set_alias("churn", "production", 2)
        assert repo.get_version("churn", "production").version == 2
        assert repo.get_version("churn", 2).aliases == ("production",)
        repo.set_alias("churn", "production", 1)  # moves it
        assert repo.get_version("churn", "production").version == 1
        assert repo.get_version("churn", 2).aliases == ()


@pytest.mark.parametrize(
    ("name", "selector", "message"),
    [
        ("nope", "latest", "calibrator 'nope' not found"),
        ("nope", 1, "calibrator 'nope' not found"),
        ("churn", 7, "version 7 of 'churn' not found"),
        ("churn", "staging", "alias 'staging' of 'churn' not found"),
    ],
)
def test_get_version_not_found_names_what_is_missing(
    database: Database, make_version: MakeVersion, name: str, selector: int | str, message: str
) -> None:
    _fill(database, make_version, {"churn": ["platt"]})
    with database.transaction(write=True) as repo, pytest.raises(NotFound) as caught:
        repo.get_version(name, selector)
    assert caught.value.detail == message


def test_a_version_reads_back_as_it_was_stored(
    database: Database, make_version: MakeVersion
) -> None:
    new = make_version(
        "auto",
        params={"candidates": ["platt", "isotonic"], "nested": {"x": [1.5, 0.1 + 0.2]}},
        description="weekly refit",
        tags={"team": "risk", "model": "gbm-7"},
        metrics={"cv": {"auc": np.float64(0.9), "ece": float("nan")}},
        selection={"chosen": "platt", "candidates": {"platt": {"log_loss": 0.31}}},
    )
    before = datetime.now(UTC)
    with database.transaction(write=True) as repo:
        created = repo.create_version("churn", new)
    with database.transaction(write=True) as repo:
        stored = repo.get_version("churn", 1)
        artifact, batch = (repo.get_artifact(stored.id), repo.get_batch(stored.id))

    assert stored == created
    assert stored.params == {"candidates": ["platt", "isotonic"], "nested": {"x": [1.5, 0.1 + 0.2]}}
    assert stored.metrics == {"cv": {"auc": 0.9, "ece": None}}  # JSON has no NaN
    assert stored.selection == new.selection
    assert stored.created_at.tzinfo is not None
    assert before - timedelta(seconds=1) <= stored.created_at <= datetime.now(UTC)
    assert decode_artifact(artifact, stored.artifact_sha256).state == {"A": -1.25, "B": 0.5}
    assert stored.artifact_bytes == len(new.artifact)
    assert decode_batch(batch).scores.shape == (20,)


def test_listing_is_paginated_in_name_order_and_hides_deleted(
    database: Database, make_version: MakeVersion
) -> None:
    _fill(
        database,
        make_version,
        {"delta": ["platt"], "alpha": ["platt", "isotonic"], "echo": ["beta"], "charlie": []},
    )
    _fill(database, make_version, {"bravo": ["platt"], "gone": ["platt"]})
    with database.transaction(write=True) as repo:
        repo.delete_calibrator("gone")

    with database.transaction(write=True) as repo:
        everything, total = repo.list_calibrators(limit=100, offset=0)
        page, page_total = repo.list_calibrators(limit=2, offset=1)
        past_end, _ = repo.list_calibrators(limit=2, offset=10)

    assert [s.name for s in everything] == ["alpha", "bravo", "delta", "echo"]
    assert total == page_total == 4
    assert [s.name for s in page] == ["bravo", "delta"]
    assert past_end == []
    alpha = everything[0]
    assert (alpha.latest_version, alpha.method, alpha.n_versions) == (2, "isotonic", 2)
    assert alpha.updated_at.tzinfo is not None


def test_a_calibrator_whose_versions_were_all_deleted_is_listed_empty(
    database: Database, make_version: MakeVersion
) -> None:
    _fill(database, make_version, {"churn": ["platt"]})
    with database.transaction(write=True) as repo:
        repo.delete_version("churn", 1)
    with database.transaction(write=True) as repo:
        (summary,), total = repo.list_calibrators(limit=10, offset=0)
        assert (summary.latest_version, summary.method, summary.n_versions, total) == (
            None,
            None,
            0,
            1,
        )
        with pytest.raises(NotFound, match="calibrator 'churn' has no versions"):
            repo.get_version("churn", "latest")
        with pytest.raises(NotFound, match="calibrator 'churn' has no versions"):
            repo.latest_version_number("churn")


def test_get_calibrator_pages_versions_newest_first(
    database: Database, make_version: MakeVersion
) -> None:
    _fill(database, make_version, {"churn": ["platt", "isotonic", "beta", "minmax"]})
    with database.transaction(write=True) as repo:
        summary, versions, total = repo.get_calibrator("churn", limit=2, offset=1)
        with pytest.raises(NotFound, match="calibrator 'nope' not found"):
            repo.get_calibrator("nope", limit=2, offset=0)
    assert (summary.name, summary.latest_version, summary.method) == ("churn", 4, "minmax")
    assert [v.version for v in versions] == [3, 2]
    assert total == 4


def test_deleting_a_version_takes_its_blobs_and_aliases(
    database: Database, make_version: MakeVersion
) -> None:
    _fill(database, make_version, {"churn": ["platt", "isotonic"]})
    with database.transaction(write=True) as repo:
        doomed = repo.get_version("churn", 2)
        repo.set_alias("churn", "production", 2)
        before = repo.get_calibrator("churn", 10, 0)[0].updated_at
    with (
        database.transaction(write=True) as repo,
        pytest.raises(Conflict, match="aliased as production"),
    ):
        repo.delete_version("churn", 2)
    with database.transaction(write=True) as repo:
        assert repo.get_version("churn", "production").version == 2
        repo.delete_version("churn", 2, force=True)
    with database.transaction(write=True) as repo:
        with pytest.raises(NotFound):
            (repo.get_artifact(doomed.id), repo.get_batch(doomed.id))
        with pytest.raises(NotFound, match="alias 'production' of 'churn' not found"):
            repo.get_version("churn", "production")
        with pytest.raises(NotFound, match="version 2 of 'churn' not found"):
            repo.delete_version("churn", 2)
        summary, _, _ = repo.get_calibrator("churn", 10, 0)
    assert summary.latest_version == 1
    assert summary.updated_at >= before


def test_deleting_a_calibrator_twice_is_not_found(
    database: Database, make_version: MakeVersion
) -> None:
    _fill(database, make_version, {"churn": ["platt"]})
    with database.transaction(write=True) as repo:
        repo.delete_calibrator("churn")
    with (
        database.transaction(write=True) as repo,
        pytest.raises(NotFound, match="'churn' not found"),
    ):
        repo.delete_calibrator("churn")


def test_alias_errors(database: Database, make_version: MakeVersion) -> None:
    _fill(database, make_version, {"churn": ["platt"]})
    with database.transaction(write=True) as repo:
        with pytest.raises(NotFound, match="version 5 of 'churn' not found"):
            repo.set_alias("churn", "production", 5)
        with pytest.raises(NotFound, match="calibrator 'nope' not found"):
            repo.set_alias("nope", "production", 1)
        repo.set_alias("churn", "production", 1)
        repo.delete_alias("churn", "production")
        with pytest.raises(NotFound, match="alias 'production' of 'churn' not found"):
            repo.delete_alias("churn", "production")


def test_blobs_are_read_one_at_a_time_or_together(
    database: Database, make_version: MakeVersion
) -> None:
    new = make_version()
    with database.transaction(write=True) as repo:
        version_id = repo.create_version("churn", new).id
    with database.transaction(write=True) as repo:
        assert repo.get_artifact(version_id) == new.artifact
        assert repo.get_batch(version_id) == new.batch
        assert (repo.get_artifact(version_id), repo.get_batch(version_id)) == (
            new.artifact,
            new.batch,
        )
        with pytest.raises(NotFound, match="deleted meanwhile"):
            repo.get_artifact(version_id + 1)


@pytest.mark.parametrize(
    "key",
    ['team"', "back\\slash", "new\nline", "dot.ted", "$[0]", "quote'd", "ünï"],
)
def test_the_tag_filter_finds_keys_of_any_characters(
    database: Database, make_version: MakeVersion, key: str
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", make_version(tags={key: 'v"1\\'}))
        repo.create_version("other", make_version(tags={"team": "x"}))
    with database.transaction() as repo:
        items, total = repo.list_calibrators(10, 0, (key, 'v"1\\'))
        assert ([i.name for i in items], total) == (["churn"], 1)
        assert repo.list_calibrators(10, 0, (key, "v")) == ([], 0)
        assert repo.list_calibrators(10, 0, ('team":x', "x")) == ([], 0)


def test_a_batch_is_read_back_whole_from_many_pieces(
    database: Database, make_version: MakeVersion, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.store import blobs

    monkeypatch.setattr(blobs, "BLOB_PIECE_BYTES", 37)  # a prime: ragged last piece
    new = make_version()
    with database.transaction(write=True) as repo:
        stored = repo.create_version("churn", new)
        scores = np.linspace(0.1, 0.9, 30)
        other_batch = encode_batch(scores, scores > 0.4, np.full(30, 2.0), scores)
        other = repo.create_version("other", make_version(batch=other_batch))
    with database.transaction() as repo:
        data = repo.get_batch(stored.id)
        assert repo.get_artifact(stored.id) == new.artifact
        assert bytes(repo.get_batch(other.id)) == other_batch  # each written to its own row
    assert len(new.batch) > 5 * 37
    assert bytes(data) == new.batch
    np.testing.assert_array_equal(decode_batch(data).scores, decode_batch(new.batch).scores)
