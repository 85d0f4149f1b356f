"""Versions' blobs in object storage (moto's S3 server) on both databases: the row keeps keys
and no bytes, the bytes come back checked, identical content is one object, a missing or
altered object is a 503 naming it, and collection deletes what no row names, only once it is
older than the grace period."""

from __future__ import annotations

import socket
import time
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from app.errors import ObjectStoreUnavailable
from app.settings import Settings
from app.store import Database, decode_batch, encode_batch
from app.store.blobs import BlobOperations
from app.store.collect import collect_blobs
from app.store.migrate import downgrade
from app.store.objects import BlobLocation, ObjectStore, content_key
from tests.objects import drop_bucket, s3_client

from .conftest import MakeVersion


@pytest.fixture
def blobs() -> str:
    """Object storage only."""
    return "s3"


def stored_objects(database: Database) -> dict[str, bytes]:
    """Every blob in the test's bucket, by digest."""
    objects = database.objects
    assert objects is not None
    client = objects._client
    return {
        digest: client.get_object(Bucket=objects.location.bucket, Key=objects.location.key(digest))[
            "Body"
        ].read()
        for digest, _ in objects.listed()
    }


def blob_row(database: Database, version_id: int) -> tuple[Any, ...]:
    """The version's ``version_blobs`` row: bytes' lengths and keys."""
    with database.engine.connect() as connection:
        row = connection.execute(
            text(
                "SELECT length(artifact), length(batch), artifact_key, batch_key "
                "FROM version_blobs WHERE version_id = :id"
            ),
            {"id": version_id},
        ).one()
    return tuple(row)


def test_the_row_keeps_keys_and_the_bytes_come_back_checked(
    database: Database, make_version: MakeVersion
) -> None:
    new = make_version()
    with database.transaction(write=True) as repo:
        record = repo.create_version("churn", new)
    assert blob_row(database, record.id) == (
        0,
        0,
        content_key(new.artifact),
        content_key(new.batch),
    )
    assert stored_objects(database) == {
        content_key(new.artifact): new.artifact,
        content_key(new.batch): bytes(new.batch),
    }
    with database.transaction() as repo:
        assert repo.get_artifact(record.id) == new.artifact
        batch = repo.get_batch(record.id)
    assert bytes(batch) == bytes(new.batch)
    assert decode_batch(batch).labels.tolist() == [0] * 10 + [1] * 10


def test_identical_content_is_one_object(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        for _ in range(3):
            repo.create_version("churn", make_version())
    assert len(stored_objects(database)) == 2  # one artifact, one batch, for three versions


@pytest.mark.parametrize("harm", ["missing", "altered"])
def test_a_missing_or_altered_object_is_a_503_naming_it(
    database: Database, make_version: MakeVersion, harm: str
) -> None:
    new = make_version()
    with database.transaction(write=True) as repo:
        record = repo.create_version("churn", new)
    objects = database.objects
    assert objects is not None
    key = objects.location.key(content_key(new.batch))
    client = s3_client(objects._client.meta.endpoint_url)
    if harm == "missing":
        client.delete_object(Bucket=objects.location.bucket, Key=key)
    else:
        client.put_object(Bucket=objects.location.bucket, Key=key, Body=b"not the batch")
    with database.transaction() as repo, pytest.raises(ObjectStoreUnavailable) as raised:
        repo.get_batch(record.id)
    expected = "is missing" if harm == "missing" else "fails its sha256 check"
    assert expected in raised.value.detail
    assert content_key(new.batch)[:12] in raised.value.detail
    with database.transaction() as repo:  # the artifact is untouched
        assert repo.get_artifact(record.id) == new.artifact


def test_collection_deletes_what_no_row_names_once_past_the_grace(
    database: Database, make_version: MakeVersion
) -> None:
    scores = np.linspace(0.1, 0.9, 20)
    own_batch = encode_batch(scores, (scores > 0.4).astype(np.int64), np.ones(20), scores)
    kept, shared, gone = make_version(), make_version(), make_version(batch=own_batch)
    with database.transaction(write=True) as repo:
        for new in (kept, shared, gone):
            repo.create_version("churn", new)
    objects = database.objects
    assert objects is not None
    orphan = objects.put(b"an upload whose commit failed")
    assert collect_blobs(database) == 0  # everything is younger than the grace period
    with database.transaction(write=True) as repo:
        repo.delete_version("churn", 3)  # its batch is its own; its artifact is shared
    assert collect_blobs(database, grace=timedelta(seconds=-1)) == 2
    remaining = stored_objects(database)
    assert orphan not in remaining
    assert content_key(gone.batch) not in remaining
    assert set(remaining) == {content_key(kept.artifact), content_key(kept.batch)}


def test_a_blob_collected_between_upload_and_commit_is_uploaded_again(
    database: Database, make_version: MakeVersion
) -> None:
    new = database.offloaded(make_version())
    assert new.blob_keys is not None
    with database.transaction(write=True) as repo:
        record = repo.create_version("churn", new)
    objects = database.objects
    assert objects is not None
    objects.delete([new.blob_keys[1]])  # what a sweep that listed an older copy would do
    database.kept(new)
    with database.transaction() as repo:
        assert bytes(repo.get_batch(record.id)) == bytes(new.batch)


def test_a_url_that_is_not_a_bucket_is_refused() -> None:
    assert BlobLocation.parse("s3://my-bucket/some/prefix/") == BlobLocation(
        "my-bucket", "some/prefix"
    )
    assert BlobLocation.parse("s3://my-bucket").key("ab") == "blobs/ab"
    for url in ("http://bucket/x", "s3://", "s3://B/x", "s3://bucket/x?y=1", "bucket"):
        with pytest.raises(ValueError, match="s3://bucket"):
            BlobLocation.parse(url)


def test_a_fit_committed_between_a_collections_listing_and_its_delete_keeps_its_objects(
    database: Database, make_version: MakeVersion, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collection listed an object no row named (a fit's whose commit failed, say); a
    new fit of the same content commits after the collection read the names but before its
    delete: the delete's second look, under the lock the fit's row took, spares it."""
    new = make_version()
    objects = database.objects
    assert objects is not None
    objects.put(new.artifact)
    objects.put(new.batch)  # left by a fit whose commit failed
    names = BlobOperations.blob_keys
    committed: list[int] = []

    def then_a_fit(self: BlobOperations, among: Any = None) -> set[str]:
        found = names(self, among)
        if among is None and not committed:  # the collection's first read of the names
            with database.transaction(write=True) as repo:
                committed.append(repo.create_version("churn", database.offloaded(new)).id)
        return found

    monkeypatch.setattr(BlobOperations, "blob_keys", then_a_fit)
    assert collect_blobs(database, grace=timedelta(seconds=-1)) == 0
    with database.transaction() as repo:
        assert bytes(repo.get_batch(committed[0])) == bytes(new.batch)


def test_the_check_after_a_commit_never_fails_the_stored_version(
    database: Database, make_version: MakeVersion, monkeypatch: pytest.MonkeyPatch
) -> None:
    new = database.offloaded(make_version())
    objects = database.objects
    assert objects is not None

    def unreachable(digest: str) -> bool:
        raise ObjectStoreUnavailable("the bucket went")

    monkeypatch.setattr(objects, "has", unreachable)
    database.kept(new)  # logged, not raised: the version is stored


def test_a_bucket_that_hangs_is_not_ready_within_seconds(database: Database) -> None:
    with socket.socket() as hanging:
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(8)  # accepts, never answers
        port = hanging.getsockname()[1]
        store = ObjectStore("s3://hangs/x", f"http://127.0.0.1:{port}")
        started = time.monotonic()
        assert store.ping() is False
        assert time.monotonic() - started < 3.5  # one attempt of 2 s (two took 4 s)


def test_a_deleted_bucket_is_named_as_such(database: Database, make_version: MakeVersion) -> None:
    with database.transaction(write=True) as repo:
        record = repo.create_version("churn", database.offloaded(make_version()))
    objects = database.objects
    assert objects is not None
    drop_bucket(objects._client.meta.endpoint_url, objects.location.bucket)
    with database.transaction() as repo, pytest.raises(ObjectStoreUnavailable) as raised:
        repo.get_batch(record.id)
    assert "is in a bucket that does not exist" in raised.value.detail


def test_a_downgrade_below_0009_is_refused_while_blobs_are_in_the_bucket(
    database: Database, database_url: str, make_version: MakeVersion
) -> None:
    with database.transaction(write=True) as repo:
        repo.create_version("churn", database.offloaded(make_version()))
    database.dispose()
    with pytest.raises(RuntimeError, match="keep their blobs in object storage"):
        downgrade(database_url, "0008")


@pytest.mark.parametrize(
    "url", ["s3://bucket/a//b", "s3://bucket/a/./b", "s3://bucket/../b", "s3://bucket/a\nb"]
)
def test_a_prefix_that_is_not_plain_segments_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="plain path segments"):
        Settings(blob_url=url)


def test_a_prefix_past_840_bytes_is_refused() -> None:
    assert Settings(blob_url="s3://bucket/" + "p" * 840).blob_url is not None
    with pytest.raises(ValueError, match="over 840 bytes"):
        Settings(blob_url="s3://bucket/" + "p" * 841)
