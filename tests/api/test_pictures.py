"""Reliability diagrams over HTTP: PNG of the right size, SVG with the expected elements."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET

import matplotlib.image

from tests.client import TestClient

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch
from .test_multiclass import logits_batch

BASE = "/v1/calibrators/churn"


def ids(svg: bytes) -> set[str]:
    root = ET.fromstring(svg)
    assert root.tag.endswith("svg")
    return {el.attrib["id"] for el in root.iter() if "id" in el.attrib}


def test_png_and_svg_of_a_stored_version(client: TestClient) -> None:
    assert (
        client.post(f"{BASE}/fit", json={**sigmoid_batch(500), "method": "isotonic"}).status_code
        == 201
    )
    r = client.get(f"{BASE}/versions/latest/diagnostics.png")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    pixels = matplotlib.image.imread(io.BytesIO(r.content), format="png")
    assert pixels.shape[:2] == (900, 800)
    again = client.get(f"{BASE}/versions/1/diagnostics.png")
    assert again.content == r.content  # cached per (version, query), and deterministic
    assert client.app.state.service.diagnosis.pictures.hits >= 1  # type: ignore[attr-defined]
    r = client.get(f"{BASE}/versions/1/diagnostics.svg?n_bins=20&strategy=quantile")
    assert r.headers["content-type"].startswith("image/svg+xml")
    assert {"diagonal", "calibrated-curve", "raw-curve", "histogram"} <= ids(r.content)
    for fragment in (b"churn v1", b"isotonic", b"n = 500"):  # the title
        assert fragment in r.content


def test_posted_batch_as_a_picture(client: TestClient) -> None:
    assert (
        client.post(f"{BASE}/fit", json={**sigmoid_batch(300), "method": "platt"}).status_code
        == 201
    )
    fresh = sigmoid_batch(400, seed=8)
    r = client.post(f"{BASE}/versions/1/diagnostics", json=fresh, headers={"accept": "image/png"})
    assert r.headers["content-type"] == "image/png"
    assert matplotlib.image.imread(io.BytesIO(r.content), format="png").shape[:2] == (900, 800)
    r = client.post(
        f"{BASE}/versions/1/diagnostics", json=fresh, headers={"accept": "image/svg+xml"}
    )
    assert "raw-curve" in ids(r.content)
    r = client.post(f"{BASE}/versions/1/diagnostics", json={**fresh, "bootstrap": FEW_RESAMPLES})
    assert r.headers["content-type"] == "application/json"


def test_multiclass_picture_and_errors(client: TestClient) -> None:
    r = client.post(
        "/v1/calibrators/digits/fit", json={**logits_batch(300), "method": "temperature"}
    )
    assert r.status_code == 201
    r = client.get("/v1/calibrators/digits/versions/1/diagnostics.svg?class_index=1")
    assert b"class 1" in r.content
    assert_problem(
        client.get("/v1/calibrators/digits/versions/1/diagnostics.png?class_index=7"),
        422,
        "class_index",
    )
    assert_problem(client.get(f"{BASE}/versions/1/diagnostics.png"), 404, "churn")
    assert_problem(
        client.get("/v1/calibrators/digits/versions/1/diagnostics.png?n_bins=1"), 422, "n_bins"
    )


def test_smooth_curves_and_their_bands(client: TestClient) -> None:
    assert (
        client.post(f"{BASE}/fit", json={**sigmoid_batch(600), "method": "platt"}).status_code
        == 201
    )
    url = f"{BASE}/versions/1/diagnostics.svg"
    binned = ids(client.get(f"{url}?bootstrap={FEW_RESAMPLES}").content)
    assert "calibrated-curve" in binned
    assert "calibrated-smooth" not in binned
    smooth = ids(client.get(f"{url}?bootstrap={FEW_RESAMPLES}&curve=smooth").content)
    assert {"calibrated-smooth", "raw-smooth", "calibrated-band", "raw-band"} <= smooth
    assert "calibrated-curve" not in smooth
    both = ids(client.get(f"{url}?bootstrap={FEW_RESAMPLES}&curve=both").content)
    assert {"calibrated-smooth", "calibrated-band", "calibrated-curve", "raw-curve"} <= both
    unbanded = ids(client.get(f"{url}?bootstrap=0&curve=smooth").content)
    assert "calibrated-smooth" in unbanded
    assert "calibrated-band" not in unbanded  # no resamples, no band
    fresh = sigmoid_batch(400, seed=8)
    posted = client.post(
        f"{BASE}/versions/1/diagnostics?bootstrap={FEW_RESAMPLES}",
        json={**fresh, "curve": "both"},
        headers={"accept": "image/svg+xml"},
    )
    assert {"calibrated-smooth", "calibrated-curve"} <= ids(posted.content)
    assert_problem(client.get(f"{url}?curve=wiggly"), 422, "curve")


def test_compare_picture_overlays_the_versions_best_first(client: TestClient) -> None:
    batch = sigmoid_batch(500)
    for method in ("platt", "isotonic", "histogram_binning"):
        assert client.post(f"{BASE}/fit", json={**batch, "method": method}).status_code == 201
    fresh = sigmoid_batch(600, seed=4)
    r = client.post(
        f"{BASE}/compare",
        params={"curve": "both", "bootstrap": FEW_RESAMPLES},
        json=fresh,
        headers={"accept": "image/svg+xml"},
    )
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("image/svg+xml")
    found = ids(r.content)
    for i in range(3):
        assert {f"version-{i}-curve", f"version-{i}-smooth"} <= found
    ranked = client.post(f"{BASE}/compare?bootstrap=0", json=fresh).json()["versions"]
    best = ranked[0]
    assert f"v{best['version']} {best['method']}".encode() in r.content
    text = r.content.decode()
    positions = [text.index(f"v{row['version']} {row['method']}") for row in ranked]
    assert positions == sorted(positions)  # the legend lists them best first
    png = client.post(
        f"{BASE}/compare", json={**fresh, "versions": [1, 2]}, headers={"accept": "image/png"}
    )
    assert png.headers["content-type"] == "image/png"
    assert matplotlib.image.imread(io.BytesIO(png.content), format="png").shape[:2] == (700, 800)
    assert_problem(
        client.post(
            f"{BASE}/compare", json={**fresh, "versions": [9]}, headers={"accept": "image/png"}
        ),
        404,
        "9",
    )
