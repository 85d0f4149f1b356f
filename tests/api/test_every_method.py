"""Every method of docs/methods.md is reachable through POST /fit, and a stored version predicts
the same after a cold load from its artifact (a second process, nothing cached)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from app.calibration import METHODS, MULTICLASS_ONLY
from app.main import create_app
from app.settings import Settings
from app.store import Database
from tests.client import TestClient

from .helpers import sigmoid_batch
from .test_multiclass import logits_batch

BINARY_ONLY = ("logistic_correction", "minmax")


def probability_rows(batch: dict[str, Any]) -> dict[str, Any]:
    z = np.array(batch["scores"])
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return {**batch, "scores": (p / p.sum(axis=1, keepdims=True)).tolist()}


def batches_for(method: str) -> list[dict[str, Any]]:
    binary = sigmoid_batch(300, seed=4)
    probabilities = {**binary, "scores": (1 / (1 + np.exp(-np.array(binary["scores"])))).tolist()}
    multiclass = probability_rows(logits_batch(300, k=4, seed=4))
    if method == "beta":
        return [probabilities, multiclass]
    if method in BINARY_ONLY:
        return [binary]
    if method in MULTICLASS_ONLY:
        return [multiclass]
    return [binary, multiclass]


@pytest.mark.parametrize("method", METHODS)
def test_fit_predict_and_cold_load(
    method: str, client: TestClient, settings: Settings, database: Database
) -> None:
    for i, batch in enumerate(batches_for(method)):
        name = f"{method}-{i}"
        r = client.post(f"/v1/calibrators/{name}/fit", json={**batch, "method": method})
        assert r.status_code == 201, r.text
        version = r.json()
        k = version["n_classes"]
        assert k == (2 if np.ndim(batch["scores"]) == 1 else 4)
        probe = batch["scores"][:50]
        warm = client.post(f"/v1/calibrators/{name}/predict", json={"scores": probe}).json()
        p = np.array(warm["probabilities"])
        assert np.all((p >= 0) & (p <= 1))
        if k > 2:
            np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
        with TestClient(create_app(settings, database=database)) as cold:
            again = cold.post(f"/v1/calibrators/{name}/predict", json={"scores": probe}).json()
            assert again == warm
            stored = cold.get(f"/v1/calibrators/{name}/versions/1").json()
            assert stored["fitted"] == version["fitted"]
            assert stored["artifact"] == version["artifact"]
