"""The edges a hostile pass found in issue 27's label-shift and estimate routes, on SQLite and
PostgreSQL: an adjust racing a delete of its calibrator, an array of bad priors, many classes,
a class fitted without weight, costs too large to be costs, one prediction's AUC."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import pytest

from app.service.estimates import tagged_costs
from app.service.traffic.live import PRIOR_CLASSES, live_priors
from tests.client import TestClient

from .helpers import assert_problem, sigmoid_batch

BASE = "/v1/calibrators/churn"


@pytest.mark.in_threads  # the adjust's job reads and writes through this process's database
def test_an_adjust_racing_a_delete_never_revives_the_calibrator(fitted: TestClient) -> None:
    """The delete holds its transaction open while the adjust reads, computes and comes to
    write: the adjust waits for the calibrator's lock and finds it gone (the serial order
    delete, then adjust), instead of storing a version of a calibrator that no longer is."""
    service: Any = fitted.app.state.service  # type: ignore[attr-defined]
    deleted, release = threading.Event(), threading.Event()

    def delete() -> None:
        with service.database.transaction(write=True) as repo:
            repo.delete_calibrator("churn")
            deleted.set()
            release.wait(30)

    answers: list[int] = []
    deleter = threading.Thread(target=delete)
    deleter.start()
    assert deleted.wait(30)
    adjuster = threading.Thread(
        target=lambda: answers.append(
            fitted.post(f"{BASE}/versions/1/adjust", json={"prior": 0.2}).status_code
        )
    )
    adjuster.start()
    time.sleep(0.5)  # the adjust is under way: reading, or waiting for the lock
    release.set()
    deleter.join(30)
    adjuster.join(30)
    assert answers in ([404], [503])  # 503: SQLite's writer waited past its busy timeout
    assert fitted.get(BASE).status_code == 404


def test_an_array_of_bad_priors_is_refused_at_its_first_bad_entry(fitted: TestClient) -> None:
    body = {"priors": [0.5, 0.5, *([-1.0] * 60_000)]}
    r = fitted.post(f"{BASE}/versions/1/adjust", json=body)
    problem = assert_problem(r, 422, "strictly between 0 and 1")
    assert problem["errors"][0]["loc"] == ["body", "priors", 2]
    assert len(problem["errors"]) == 1
    assert len(r.content) < 2_000  # one error, not one per entry


def test_a_class_fitted_without_weight_has_no_prior_estimate(client: TestClient) -> None:
    batch = sigmoid_batch(600)
    weights = np.where(np.array(batch["labels"]) == 1, 1e-300, 1.0)
    fit = client.post(f"{BASE}/fit", json={**batch, "sample_weight": weights.tolist()})
    assert fit.status_code == 201, fit.text
    found = client.post(f"{BASE}/versions/1/estimate", json={"scores": [0.1, 1.0, 2.0]}).json()
    assert found["prior"]["training"] < 1e-12
    assert (found["prior"]["estimated"], found["prior"]["interval"]) == (None, None)
    assert client.post(f"{BASE}/versions/1/adjust", json={"prior": 0.3}).status_code == 409


def test_one_prediction_has_no_expected_auc(fitted: TestClient) -> None:
    found = fitted.post(f"{BASE}/versions/1/estimate", json={"scores": [0.3]}).json()
    assert found["estimated"]["roc_auc"] is None
    assert "roc_auc" not in found["estimated"]["intervals"]
    assert found["estimated"]["accuracy"] is not None


def test_the_pictures_refuse_a_repeated_threshold(fitted: TestClient) -> None:
    for suffix in ("png", "svg"):
        r = fitted.get(f"{BASE}/monitoring.{suffix}?threshold=0.3&threshold=0.9")
        assert assert_problem(r, 422, "once")["errors"][0]["loc"] == ["query", "threshold"]


def test_costs_past_a_trillion_in_tags_make_no_decision() -> None:
    assert tagged_costs({"cost_fp": "1e308", "cost_fn": "1e308"}) is None
    assert tagged_costs({"cost_fp": "1", "cost_fn": "1e13"}) is None
    for odd in ("1_000", "\u0663", "nan", "inf", "0x10", "1,5", ""):  # float() reads some
        assert tagged_costs({"cost_fp": "1", "cost_fn": odd}) is None, odd
    assert tagged_costs({"cost_fp": " 2.5e0 ", "cost_fn": ".5"}) is not None
    costs = tagged_costs({"cost_fp": "1", "cost_fn": "4"})
    assert costs is not None
    assert costs.threshold == pytest.approx(0.2)


def test_the_live_gauges_leave_out_priors_they_cannot_show() -> None:
    """No interval (past the classes EM's Newton steps and interval are computed for), or
    more classes than the gauges export: no prior series, and the tick goes on."""
    k = PRIOR_CLASSES + 1
    many = {"training": [1 / k] * k, "estimated": [1 / k] * k, "interval": [[0.0, 1.0]] * k}
    assert live_priors(many) is None
    assert live_priors({**many, "interval": None}) is None
    few = {"training": [0.5, 0.5], "estimated": [0.4, 0.6], "interval": [[0.3, 0.5], [0.5, 0.7]]}
    assert live_priors(few) == {"0": [0.5, 0.4, 0.3, 0.5], "1": [0.5, 0.6, 0.5, 0.7]}
