"""The service with its blobs in object storage (moto's S3 server on loopback), on both
databases: fits, predicts and diagnostics (read by a worker process) as with blobs in the
database; ``/readyz`` reports the bucket; a bucket gone before a fit's upload stores nothing
and answers 503; a stored version whose object went is a 503 naming the object, never a 500;
``python -m app.store.collect`` collects what no row names."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from app.settings import get_settings
from app.store import Database
from app.store import collect as collect_module
from app.store.collect import collect_blobs
from app.store.objects import ObjectStore
from tests.client import TestClient
from tests.objects import drop_bucket, s3_client

from .helpers import sigmoid_batch


@pytest.fixture
def blobs() -> str:
    """Object storage only."""
    return "s3"


def fit(client: TestClient, method: str = "platt") -> Any:
    return client.post("/v1/calibrators/churn/fit", json={**sigmoid_batch(), "method": method})


def test_a_version_with_blobs_in_the_bucket_serves_as_any(
    client: TestClient, database: Database, blob_settings: dict[str, Any]
) -> None:
    answer = fit(client, "isotonic")
    assert answer.status_code == 201, answer.text
    predicted = client.post("/v1/calibrators/churn/predict", json={"scores": [-1.0, 0.0, 2.0]})
    assert predicted.status_code == 200, predicted.text
    report = client.get("/v1/calibrators/churn/versions/1/diagnostics", params={"bootstrap": 0})
    assert report.status_code == 200, report.text
    assert sum(b["count"] for b in report.json()["calibrated"]["bins"]) == 400
    exported = client.get("/v1/calibrators/churn/versions/1/artifact")
    assert exported.status_code == 200, exported.text
    assert database.objects is not None
    assert len(list(database.objects.listed())) == 2
    assert client.get("/readyz").json() == {"status": "ready"}


def test_concurrent_fits_share_the_objects_of_identical_content(
    client: TestClient, database: Database
) -> None:
    """12 fits at once, two batches six times each: versions 1 to 12, one object per
    distinct artifact and batch, each version's batch read back whole."""

    def one(seed: int) -> int:
        body = {**sigmoid_batch(seed=seed % 2), "method": "platt"}
        answer = client.post("/v1/calibrators/race/fit", json=body)
        assert answer.status_code == 201, answer.text
        version: int = answer.json()["version"]
        return version

    with ThreadPoolExecutor(max_workers=12) as pool:
        versions = sorted(pool.map(one, range(12)))
    assert versions == list(range(1, 13))
    assert database.objects is not None
    assert len(list(database.objects.listed())) == 4  # two artifacts, two batches
    for version in (1, 12):
        url = f"/v1/calibrators/race/versions/{version}/diagnostics"
        assert client.get(url, params={"bootstrap": 0}).status_code == 200


def test_readiness_names_a_bucket_that_went(
    client: TestClient, blob_settings: dict[str, Any]
) -> None:
    drop_bucket(blob_settings["blob_endpoint_url"], blob_settings["blob_url"][5:].split("/")[0])
    ready = client.get("/readyz")
    assert ready.status_code == 503
    problem = ready.json()
    assert problem["detail"] == "the object store does not answer"
    assert problem["type"].endswith("/problems/object-store-unavailable")
    assert ready.headers["retry-after"] == "5"


@pytest.mark.in_threads  # it patches the upload the fit's job makes
def test_a_bucket_gone_mid_fit_stores_nothing_and_answers_503(
    client: TestClient, blob_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert fit(client).status_code == 201
    endpoint, bucket = blob_settings["blob_endpoint_url"], blob_settings["blob_url"][5:]
    original = ObjectStore.put

    def gone_first(self: ObjectStore, data: bytes | memoryview) -> str:
        drop_bucket(endpoint, bucket.split("/")[0])  # after the fit's numbers, before its upload
        return original(self, data)

    monkeypatch.setattr(ObjectStore, "put", gone_first)
    answer = fit(client)
    assert answer.status_code == 503, answer.text
    assert answer.json()["type"].endswith("/problems/object-store-unavailable")
    assert "is in a bucket that does not exist" in answer.json()["detail"]
    listed = client.get("/v1/calibrators/churn").json()
    assert [v["version"] for v in listed["versions"]] == [1]


def test_a_version_whose_object_went_is_a_503_naming_it(
    client: TestClient, database: Database
) -> None:
    assert fit(client).status_code == 201
    objects = database.objects
    assert objects is not None
    client_s3 = s3_client(objects._client.meta.endpoint_url)
    for digest, _ in objects.listed():
        client_s3.delete_object(Bucket=objects.location.bucket, Key=objects.location.key(digest))
    report = client.get("/v1/calibrators/churn/versions/1/diagnostics", params={"bootstrap": 0})
    assert report.status_code == 503, report.text
    assert "is missing" in report.json()["detail"]
    assert report.json()["type"].endswith("/problems/object-store-unavailable")


def test_the_collect_command_deletes_what_no_row_names(
    client: TestClient,
    database: Database,
    blob_settings: dict[str, Any],
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert fit(client).status_code == 201
    objects = database.objects
    assert objects is not None
    objects.put(b"left by a fit whose commit failed")
    assert collect_blobs(database) == 0  # younger than the grace period
    monkeypatch.setenv("CALIBRATION_DATABASE_URL", database_url)
    monkeypatch.setenv("CALIBRATION_BLOB_URL", blob_settings["blob_url"])
    monkeypatch.setenv("CALIBRATION_BLOB_ENDPOINT_URL", blob_settings["blob_endpoint_url"])
    get_settings.cache_clear()
    try:
        collect_module.main(["--grace-hours", "-1"])
    finally:
        get_settings.cache_clear()
    assert capsys.readouterr().out.strip() == "deleted 1 objects no version names"
    assert len(list(objects.listed())) == 2
    assert client.get("/v1/calibrators/churn/versions/1/diagnostics").status_code == 200
