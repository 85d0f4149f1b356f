"""The monitoring page's controls (a plain GET form: window and version), its table of
expected against realized figures, and its CSV link, against the API's numbers."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from app.ui import pages
from tests.api.helpers import sigmoid_batch
from tests.client import TestClient

from .conftest import fit
from .html_checks import parse


def _traffic(client: TestClient) -> None:
    """``churn`` v1 and v2, production on v1, 300 predictions of v1 logged, half labelled."""
    fit(client, "churn", "platt")
    fit(client, "churn", "isotonic")
    client.put("/v1/calibrators/churn/aliases/production", json={"version": 1})
    batch = sigmoid_batch(300, seed=4)
    ids = [f"m{i}" for i in range(300)]
    answer = client.post(
        "/v1/calibrators/churn/predict?version=1", json={"scores": batch["scores"], "ids": ids}
    )
    assert answer.status_code == 200, answer.text
    client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    outcomes = {"ids": ids[::2], "labels": batch["labels"][::2]}
    assert client.post("/v1/calibrators/churn/outcomes", json=outcomes).status_code == 200


def test_the_controls_choose_the_window_and_the_version(open_client: TestClient) -> None:
    _traffic(open_client)
    page = parse(open_client.get("/ui/calibrators/churn/monitoring?window=1h&version=1").text)
    selects = {e.attrs["id"] for e in page.all("select")}
    assert selects == {"window", "version"}
    options = [
        (e.attrs.get("value"), e.text.strip(), "selected" in e.attrs) for e in page.all("option")
    ]
    assert ("1h", "1h", True) in options
    assert ("production", "production → v1", False) in options
    labels = {value: (text, selected) for value, text, selected in options}
    assert labels["1"][0].startswith("v1 · platt · ")
    assert labels["1"][1] is True
    assert labels["2"][0].startswith("v2 · isotonic · ")
    assert labels["2"][1] is False
    assert ("latest", "latest → v2", False) in options
    assert ("", "every version", False) in options
    assert {e.attrs["for"] for e in page.all("label")} >= {"window", "version"}


def test_the_table_and_the_csv_hold_the_apis_numbers(open_client: TestClient) -> None:
    _traffic(open_client)
    html = open_client.get("/ui/calibrators/churn/monitoring?window=1h").text
    page = parse(html)
    (link,) = [a for a in page.all("a") if ".csv" in a.attrs.get("href", "")]
    assert link.attrs["href"] == "/ui/calibrators/churn/monitoring.csv?window=1h"
    table = open_client.get(link.attrs["href"])
    assert table.status_code == 200
    assert table.headers["content-type"] == "text/csv; charset=utf-8"
    api_table = open_client.get("/v1/calibrators/churn/monitoring.csv", params={"window": "1h"})
    served = [line for line in table.text.splitlines() if ",1," in line or line.startswith("s")]
    assert served == [  # the API's CSV of the same range: its header and the window with traffic
        line for line in api_table.text.splitlines() if ",1," in line or line.startswith("s")
    ]
    assert len(served) == 2
    api = open_client.get("/v1/calibrators/churn/monitoring", params={"window": "1h"}).json()[
        "windows"
    ]
    (row,) = [r for r in api if r["n_predictions"]]
    cells = [" ".join(e.text.split()) for e in page.all("td")]
    assert cells[:2] == ["v1", "300 150 labelled"]
    band = row["estimated"]["intervals"]["accuracy"]
    assert f"{row['estimated']['accuracy']:.4f} [{band[0]:.4f}, {band[1]:.4f}]" in " ".join(cells)
    assert f"{row['realized']['accuracy']:.4f}" in cells
    assert f"{row['prior']['training']:.4f}" in cells
    lines = [line for line in csv.DictReader(io.StringIO(table.text)) if line["version"]]
    assert len(lines) == 1
    assert float(lines[0]["estimated_accuracy"]) == row["estimated"]["accuracy"]
    assert np.isclose(float(lines[0]["realized_log_loss"]), row["log_loss"])


@pytest.mark.in_threads  # it patches how many versions the select offers
def test_a_version_asked_beyond_the_select_s_newest_is_offered_and_selected(
    open_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "MAX_CHOICES", 1)
    _traffic(open_client)
    page = parse(open_client.get("/ui/calibrators/churn/monitoring?version=1").text)
    offered = [(e.attrs["value"], "selected" in e.attrs) for e in page.all("option")]
    assert ("2", False) in offered
    assert ("1", True) in offered  # not among the newest one, but asked: kept selected
