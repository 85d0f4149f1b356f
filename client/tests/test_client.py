"""Client against a live service: each call's typed answer, the same numbers whichever
transport carries a batch, and the service's errors as CalibrationError fields."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime

import numpy as np
import pytest
from calibration_client import (
    CalibrationError,
    Client,
    Comparison,
    Diagnostics,
    NotFoundError,
    OutcomeReceipt,
    Prediction,
    UnprocessableError,
    Version,
)
from numpy.typing import NDArray


def unique(prefix: str) -> str:
    """A calibrator name no other test uses (the service is shared by the session)."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def binary_batch(n: int, seed: int = 0) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=n) * 1.7 + rng.random(n) * 1e-9  # digits past %.15g matter
    labels = (rng.random(n) < 1 / (1 + np.exp(-scores))).astype(np.int64)
    return scores, labels


@pytest.fixture(scope="module")
def client(service_url: str) -> Iterator[Client]:
    with Client(service_url, timeout=120.0) as c:
        yield c


def test_fit_answers_a_typed_version(client: Client) -> None:
    name = unique("typed")
    scores, labels = binary_batch(300)
    version = client.fit(
        name, scores.tolist(), labels.tolist(), method="platt", description="weekly",
        tags={"team": "risk"},
    )  # fmt: skip
    assert isinstance(version, Version)
    assert (version.name, version.version, version.method) == (name, 1, "platt")
    assert version.n_samples == 300
    assert version.n_classes == 2
    assert version.n_positive == int(labels.sum())
    assert set(version.fitted) >= {"A", "B"}
    assert set(version.metrics) == {"cv", "raw"}
    assert isinstance(version.created_at, datetime)
    assert version.created_at.tzinfo is not None
    assert version.description == "weekly"
    assert version.tags == {"team": "risk"}
    assert version.document["artifact"]["sha256"]


def test_the_registry_calls(client: Client) -> None:
    name = unique("registry")
    scores, labels = binary_batch(300)
    first = client.fit(name, scores, labels, method="platt")
    second = client.fit(name, scores, labels, method="isotonic")
    assert [v.version for v in client.versions(name)] == [second.version, first.version]
    moved = client.set_alias(name, "production", first.version)
    assert moved.version == first.version
    assert "production" in moved.aliases
    assert client.version(name, "production").method == "platt"
    assert client.version(name).version == second.version  # latest by default


def test_predict_outcomes_and_logging(client: Client) -> None:
    name = unique("traffic")
    scores, labels = binary_batch(300)
    client.fit(name, scores, labels, method="platt")
    prediction = client.predict(name, scores[:3], ids=["a", "b", "c"])
    assert isinstance(prediction, Prediction)
    assert prediction.probabilities.shape == (3,)
    assert prediction.logged == 3
    receipt = client.outcomes(name, ["a", "b", "c"], [1, 0, True])
    assert isinstance(receipt, OutcomeReceipt)
    assert receipt.matched + receipt.pending == 3
    assert receipt.duplicates == 0


def test_diagnostics_stored_and_on_a_batch(client: Client) -> None:
    name = unique("diag")
    scores, labels = binary_batch(500)
    client.fit(name, scores, labels, method="isotonic")
    stored = client.diagnostics(name, "latest", n_bins=7)
    assert isinstance(stored, Diagnostics)
    assert stored.n_bins == 7
    assert stored.strategy == "uniform"
    curve = stored.calibrated
    assert curve.count.shape == (7,)
    assert curve.count.sum() == 500
    assert np.isnan(curve.mean_predicted[curve.count == 0]).all()
    assert {"brier", "log_loss", "ece"} <= set(curve.metrics)
    fresh = client.diagnostics(name, 1, n_bins=5, scores=scores[:200], labels=labels[:200])
    assert fresh.raw.count.sum() == 200


def test_compare_ranks_versions(client: Client) -> None:
    name = unique("compare")
    scores, labels = binary_batch(600)
    client.fit(name, scores, labels, method="platt")
    client.fit(name, scores, labels, method="isotonic")
    result = client.compare(name, scores, labels, versions=[1, 2], bootstrap=50)
    assert isinstance(result, Comparison)
    assert result.by == "log_loss"
    assert result.n_samples == 600
    assert sorted(r.version for r in result.ranking) == [1, 2]
    best = result.ranking[0]
    assert best.difference == 0.0
    assert best.value == best.metrics["log_loss"]
    assert result.ranking[0].value <= result.ranking[1].value  # type: ignore[operator]
    assert "log_loss" in result.raw


def test_fit_is_the_same_by_json_arrow_and_csv(client: Client) -> None:
    """The batch's floats reach the service bit for bit whichever media type carries them."""
    name = unique("transports")
    logits, labels = binary_batch(2_000, seed=3)
    scores = 1 / (1 + np.exp(-logits))  # beta calibration takes probabilities
    weights = np.random.default_rng(4).random(2_000) + 0.25
    fits = {
        transport: client.fit(
            name, scores, labels, method="beta", sample_weight=weights, transport=transport
        )
        for transport in ("json", "arrow", "csv")
    }
    reference = fits["json"]
    for transport, version in fits.items():
        assert version.fitted == reference.fitted, transport
        assert version.metrics == reference.metrics, transport
        assert version.n_samples == 2_000


def test_a_bulk_fit_goes_by_arrow_and_agrees_with_json(client: Client) -> None:
    name = unique("bulk")
    scores, labels = binary_batch(12_000, seed=5)
    bulk = client.fit(name, scores, labels, method="isotonic")  # auto: Arrow from 10,000 rows
    small = client.fit(name, scores, labels, method="isotonic", transport="json")
    assert bulk.fitted == small.fitted
    assert bulk.metrics == small.metrics


def test_multiclass_fit_is_the_same_by_every_transport(client: Client) -> None:
    name = unique("multi")
    rng = np.random.default_rng(6)
    scores = rng.normal(size=(900, 3)) * 2
    labels = scores.argmax(axis=1)
    fits = [client.fit(name, scores, labels, method="temperature", transport=t)
            for t in ("json", "arrow", "csv")]  # fmt: skip
    assert fits[0].n_classes == 3
    assert all(f.fitted == fits[0].fitted and f.metrics == fits[0].metrics for f in fits)


def test_predict_is_bitwise_the_same_by_json_and_binary(client: Client) -> None:
    name = unique("infer")
    scores, labels = binary_batch(3_000, seed=7)
    version = client.fit(name, scores, labels, method="platt")
    wide = np.random.default_rng(8).normal(size=15_000) * 4
    by_json = client.predict(name, wide, transport="json")
    by_binary = client.predict(name, wide)  # auto: /v2 binary from 10,000 scores
    assert by_binary.version == by_json.version == version.version
    assert by_binary.probabilities.dtype == np.float64
    assert np.array_equal(by_json.probabilities, by_binary.probabilities)
    pinned = client.predict(name, wide[:5], version=1, transport="binary")
    assert np.array_equal(pinned.probabilities, by_json.probabilities[:5])


def test_multiclass_predict_is_bitwise_the_same_by_json_and_binary(client: Client) -> None:
    name = unique("infer-multi")
    rng = np.random.default_rng(9)
    scores = rng.normal(size=(900, 4))
    client.fit(name, scores, scores.argmax(axis=1), method="temperature")
    fresh = rng.normal(size=(11_000, 4))
    by_json = client.predict(name, fresh, transport="json")
    by_binary = client.predict(name, fresh)
    assert by_binary.probabilities.shape == (11_000, 4)
    assert np.array_equal(by_json.probabilities, by_binary.probabilities)


def test_a_422_carries_the_problem_fields(client: Client) -> None:
    with pytest.raises(UnprocessableError) as caught:
        client.fit(unique("bad"), [0.1, 0.2, 0.3], [0, 1, 2], method="platt")
    error = caught.value
    assert isinstance(error, CalibrationError)
    assert error.status == 422
    assert error.type == "/problems/invalid-input"
    assert error.title == "Invalid input"
    assert error.detail is not None
    assert "labels[2]" in error.detail
    assert error.errors[0]["loc"] == ["body", "labels", 2]
    assert error.request_id


def test_a_404_carries_the_problem_fields(client: Client) -> None:
    name = unique("missing")
    with pytest.raises(NotFoundError) as caught:
        client.version(name, 1)
    assert caught.value.status == 404
    assert caught.value.detail == f"calibrator {name!r} not found"
    assert caught.value.errors == []
    with pytest.raises(NotFoundError) as by_v2:
        client.predict(name, np.zeros(3), transport="binary")
    assert by_v2.value.detail is not None
    assert name in by_v2.value.detail


def test_inputs_are_checked_before_sending(client: Client) -> None:
    with pytest.raises(ValueError, match="labels has 2 values but scores has 3"):
        client.fit("never", [0.1, 0.2, 0.3], [0, 1])
    with pytest.raises(ValueError, match="sample_weight has 1 values"):
        client.fit("never", [0.1, 0.2], [0, 1], sample_weight=[1.0])
    with pytest.raises(ValueError, match=r"scores\[1\] is NaN"):
        client.predict("never", [0.1, float("nan")])


def test_a_fit_repeated_under_its_key_answers_the_first_version(client: Client) -> None:
    """What a retry after a lost answer does: the same key, the same batch, no second
    version (CLIENT.md, Idempotent fits)."""
    name = unique("idempotent")
    scores, labels = binary_batch(300)
    key = f"nightly-{uuid.uuid4().hex}"
    first = client.fit(name, scores, labels, method="platt", idempotency_key=key)
    again = client.fit(name, scores, labels, method="platt", idempotency_key=key)
    assert again.version == first.version
    assert again.document == first.document
    assert [v.version for v in client.versions(name)] == [first.version]
    with pytest.raises(UnprocessableError):  # the same key for another batch
        client.fit(name, scores[:200], labels[:200], method="platt", idempotency_key=key)


def test_predict_with_a_threshold_answers_decisions(service_url: str) -> None:
    name = f"decide-{uuid.uuid4().hex[:8]}"
    rng = np.random.default_rng(5)
    scores = rng.normal(size=300)
    labels = (rng.random(300) < 1 / (1 + np.exp(-2 * scores))).astype(int)
    wide = rng.normal(size=12_000)  # JSON, not /v2: infer has no threshold
    with Client(service_url) as client:
        client.fit(name, scores, labels, method="platt")
        p = client.predict(name, wide, threshold=0.3)
        assert p.decisions is not None
        assert np.array_equal(p.decisions, (p.probabilities > 0.3).astype(np.int64))
        assert client.predict(name, wide).decisions is None
