"""GET .../monitoring.png and .svg: the figure's size, its parts, its empty panels, its errors."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from app.store.traffic import LoggedPrediction

from .helpers import assert_problem, sigmoid_batch
from .test_monitoring import log_rows

BASE = "/v1/calibrators/churn"
T0 = datetime(2026, 11, 20, tzinfo=UTC)
HOURS = {"window": "1h", "since": T0.isoformat(), "until": (T0 + timedelta(hours=3)).isoformat()}
SVG = "{http://www.w3.org/2000/svg}"


def ids(svg: bytes) -> set[str]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return {el.attrib["id"] for el in root.iter() if "id" in el.attrib}


def texts(svg: bytes) -> list[str]:
    return ["".join(el.itertext()) for el in ET.fromstring(svg).iter(f"{SVG}text")]


@pytest.fixture
def traffic(client: TestClient) -> dict[int, dict[str, np.ndarray]]:
    """``churn`` v1 (platt) and v2 (isotonic), each answering 150 predictions in hours 0 and 1
    after T0, logged as the predict route answered them, in time order; the even ones
    labelled."""
    drawn: dict[int, dict[str, np.ndarray]] = {}
    rows: list[LoggedPrediction] = []
    labels: dict[str, int] = {}
    for version, method in ((1, "platt"), (2, "isotonic")):
        fit = client.post(
            f"{BASE}/fit", json={**sigmoid_batch(500, seed=version), "method": method}
        )
        assert fit.status_code == 201, fit.text
        fresh = sigmoid_batch(150, seed=10 + version, a=1.2)  # a little off the fitted map
        answered = client.post(
            f"{BASE}/predict", params={"version": version}, json={"scores": fresh["scores"]}
        ).json()["probabilities"]
        for i, (score, p) in enumerate(zip(fresh["scores"], answered, strict=True)):
            moment = T0 + timedelta(seconds=45 * i + version)  # 0 .. 1 h 52 min
            rows.append(LoggedPrediction("churn", f"v{version}-{i}", version, moment, score, p))
            if i % 2 == 0:
                labels[f"v{version}-{i}"] = fresh["labels"][i]
        even = slice(0, None, 2)
        drawn[version] = {
            "scores": np.asarray(fresh["scores"])[even],
            "probabilities": np.asarray(answered)[even],
            "labels": np.asarray(fresh["labels"])[even],
        }
    log_rows(client, rows, labels)
    return drawn


def test_png_of_the_monitoring_is_a_png_of_its_size(
    client: TestClient, traffic: dict[int, Any]
) -> None:
    r = client.get(f"{BASE}/monitoring.png", params=HOURS)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(r.content)) as image:
        assert (image.format, image.size) == ("PNG", (1000, 1000))
    assert client.get(f"{BASE}/monitoring.png", params=HOURS).content == r.content  # same bytes


def test_svg_names_the_calibrator_and_draws_a_line_per_version(
    client: TestClient, traffic: dict[int, Any]
) -> None:
    r = client.get(f"{BASE}/monitoring.svg", params=HOURS)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("image/svg+xml")
    drawn = ids(r.content)
    assert {"calibration", "rates", "shift", "traffic", "psi-threshold"} <= drawn
    assert {"n-predictions", "n-labelled"} <= drawn
    for key in ("ece", "log-loss", "mean-predicted", "observed-rate", "psi", "ks"):
        assert {i for i in drawn if i.startswith(f"{key}-v")} == {f"{key}-v1", f"{key}-v2"}
    assert not any(i.endswith("-empty") for i in drawn)
    title = "churn · 1h windows · 2026-11-20 00:00 to 2026-11-20 03:00 UTC"
    assert title in texts(r.content)
    assert client.get(f"{BASE}/monitoring.svg", params=HOURS).content == r.content  # no random ids

    one = client.get(f"{BASE}/monitoring.svg", params={**HOURS, "version": "2"})
    assert {i for i in ids(one.content) if i.startswith("ece-v")} == {"ece-v2"}
    assert any("version 2" in text for text in texts(one.content))


def test_a_range_without_traffic_draws_empty_panels(client: TestClient) -> None:
    assert client.post(f"{BASE}/fit", json=sigmoid_batch()).status_code == 201
    r = client.get(f"{BASE}/monitoring.svg", params=HOURS)
    assert r.status_code == 200, r.text
    drawn = ids(r.content)
    assert {"calibration-empty", "rates-empty", "shift-empty", "traffic-empty"} <= drawn
    assert not any(i.startswith("ece-v") for i in drawn)
    assert texts(r.content).count("no traffic") == 4
    png = client.get(f"{BASE}/monitoring.png")  # the default range: 30 days, none of it logged
    with Image.open(io.BytesIO(png.content)) as image:
        assert image.size == (1000, 1000)


@pytest.mark.parametrize("suffix", ["png", "svg"])
@pytest.mark.parametrize(
    ("params", "status", "fragment"),
    [
        ({"window": "2h"}, 422, "window"),
        ({"n_bins": "1"}, 422, "n_bins"),
        ({"since": "yesterday"}, 422, "since"),
        ({"since": "2026-11-20T00:00:00Z", "until": "2026-11-19T00:00:00Z"}, 422, "before until"),
        ({"version": "9"}, 404, "9"),
        ({"until": "0001-01-01T00:00:00Z"}, 422, "until"),
    ],
)
def test_pictures_refuse_a_bad_query(
    fitted: TestClient, suffix: str, params: dict[str, str], status: int, fragment: str
) -> None:
    assert_problem(fitted.get(f"{BASE}/monitoring.{suffix}", params=params), status, fragment)


def test_pictures_of_an_unknown_calibrator_are_not_found(client: TestClient) -> None:
    assert_problem(client.get("/v1/calibrators/nobody/monitoring.png"), 404, "nobody")
    assert_problem(client.get("/v1/calibrators/nobody/monitoring.svg"), 404, "nobody")


def test_the_routes_are_described(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for suffix, media in (("png", "image/png"), ("svg", "image/svg+xml")):
        op = paths[f"/v1/calibrators/{{name}}/monitoring.{suffix}"]["get"]
        assert list(op["responses"]["200"]["content"]) == [media]
        assert "PSI 0.25" in op["description"]
        assert {"window", "since", "until", "version", "n_bins"} <= {
            p["name"] for p in op["parameters"]
        }
