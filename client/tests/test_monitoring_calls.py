"""monitoring (issue 27) against the live service: each window equals, field by field, the JSON
the service answers to the same query sent by hand, its estimates, realized values and prior
typed; the service's refusals arrive with their field named."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from calibration_client import Client, NotFoundError, Prior, UnprocessableError, Window
from client_checks import binary, check_window, client, fitted, raw, unique

__all__ = ["client", "fitted", "raw"]  # the shared fixtures, used here


def test_monitoring_equals_the_services_answer(client: Client, raw: httpx.Client) -> None:
    name = unique("traffic")
    scores, labels = binary(1200, seed=8)
    client.fit(name, scores, labels, method="platt")
    live, outcome = binary(400, seed=9)
    ids = [f"case-{i}" for i in range(400)]
    client.predict(name, live, ids=ids)
    client.outcomes(name, ids[:200], outcome[:200])
    found = _when_logged(client, name, 400, 200)
    assert len(found) == 30  # the default: 30 windows of a day
    answer = raw.get(f"/v1/calibrators/{name}/monitoring")
    assert answer.status_code == 200
    rows = answer.json()["windows"]
    assert len(rows) == len(found)
    for window, row in zip(found, rows, strict=True):
        check_window(window, row)
    busy = [w for w in found if w.version is not None]
    assert busy[-1].estimated is not None
    assert busy[-1].realized is not None
    assert isinstance(busy[-1].prior, Prior)
    assert set(busy[-1].intervals) == {"log_loss", "brier", "ece"}
    empty = next(w for w in found if w.version is None)
    assert (empty.n_predictions, empty.estimated, empty.prior) == (0, None, None)

    now = datetime.now(UTC)
    options: dict[str, Any] = {
        "window": "1h",
        "since": (now - timedelta(hours=3)).replace(tzinfo=None),  # naive: UTC
        "until": (now + timedelta(hours=1)).isoformat(),
        "version": 1,
        "threshold": 0.3,
        "n_bins": 5,
        "bootstrap": 0,
    }
    hourly = client.monitoring(name, **options)
    query = {**options, "since": options["since"].isoformat()}
    rows = raw.get(f"/v1/calibrators/{name}/monitoring", params=query).json()["windows"]
    assert [w.document for w in hourly] == rows
    for window, row in zip(hourly, rows, strict=True):
        check_window(window, row)
    assert all(w.intervals == {} for w in hourly)  # bootstrap=0
    assert sum(w.n_predictions for w in hourly) == 400


def _when_logged(client: Client, name: str, predictions: int, labelled: int) -> list[Window]:
    """The monitoring windows once the log holds every prediction and outcome (it is written
    within a second)."""
    deadline = time.monotonic() + 30
    while True:
        windows = client.monitoring(name)
        counts = (sum(w.n_predictions for w in windows), sum(w.n_labelled for w in windows))
        if counts == (predictions, labelled) or time.monotonic() > deadline:
            assert counts == (predictions, labelled)
            return windows
        time.sleep(0.2)


def test_monitoring_refusals_name_their_field(client: Client, fitted: str) -> None:
    with pytest.raises(UnprocessableError) as caught:
        client.monitoring(fitted, window="2d")
    assert caught.value.errors[0]["loc"] == ["query", "window"]
    with pytest.raises(UnprocessableError) as caught:
        client.monitoring(fitted, threshold=1.5)
    assert caught.value.errors[0]["loc"] == ["query", "threshold"]
    with pytest.raises(NotFoundError):
        client.monitoring(unique("never-fitted"))
