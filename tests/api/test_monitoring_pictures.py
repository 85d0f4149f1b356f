"""GET .../monitoring.png and .svg, and .../monitoring/diagnostics: the figure's size and parts,
and the diagnostics of the labelled traffic against scikit-learn, numpy and POST diagnostics.

The tests that only read the logged traffic share one app per backend that holds it
(``shared_app`` and ``logged``); those that change it log it in an app of their own
(``client`` and ``traffic``)."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from PIL import Image
from sklearn.metrics import brier_score_loss, log_loss

from app.store.traffic.reads import TrafficReads
from app.store.traffic.rows import LoggedPrediction
from tests.client import TestClient
from tests.conftest import unchanged

from .helpers import FEW_RESAMPLES, assert_problem, sigmoid_batch
from .test_monitoring import ece, log_rows
from .test_multiclass import logits_batch

BASE = "/v1/calibrators/churn"
T0 = datetime(2026, 11, 20, tzinfo=UTC)
HOURS = {"window": "1h", "since": T0.isoformat(), "until": (T0 + timedelta(hours=3)).isoformat()}
FEW = {"bootstrap": FEW_RESAMPLES}
"""The diagnostics of these tests are read for their bins and numbers, not their intervals."""
SVG = "{http://www.w3.org/2000/svg}"


def ids(svg: bytes) -> set[str]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return {el.attrib["id"] for el in root.iter() if "id" in el.attrib}


def texts(svg: bytes) -> list[str]:
    return ["".join(el.itertext()) for el in ET.fromstring(svg).iter(f"{SVG}text")]


Drawn = dict[int, dict[str, np.ndarray]]
"""Each version's labelled traffic: its scores, the probabilities it answered, the labels."""


def log_traffic(client: TestClient) -> Drawn:
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


@pytest.fixture
def traffic(client: TestClient) -> Drawn:
    """:func:`log_traffic` in ``client``'s app, for a test that changes what it holds."""
    return log_traffic(client)


@pytest.fixture(scope="module")
def logged(shared_app: TestClient) -> Iterator[Drawn]:
    """:func:`log_traffic` in ``shared_app``, for the tests that only read it."""
    drawn = log_traffic(shared_app)
    with unchanged(shared_app):
        yield drawn


# -- the pictures ------------------------------------------------------------------------------


def test_png_of_the_monitoring_is_a_png_of_its_size(shared_app: TestClient, logged: Drawn) -> None:
    r = shared_app.get(f"{BASE}/monitoring.png", params=HOURS)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/png"
    assert r.content.startswith(b"\x89PNG\r\n\x1a\n")
    with Image.open(io.BytesIO(r.content)) as image:
        assert (image.format, image.size) == ("PNG", (1000, 1400))
    assert shared_app.get(f"{BASE}/monitoring.png", params=HOURS).content == r.content  # same bytes


def test_svg_names_the_calibrator_and_draws_a_line_per_version(
    shared_app: TestClient, logged: Drawn
) -> None:
    r = shared_app.get(f"{BASE}/monitoring.svg", params=HOURS)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("image/svg+xml")
    drawn = ids(r.content)
    assert {"calibration", "rates", "shift", "expected", "prior", "traffic"} <= drawn
    assert {"psi-threshold", "n-predictions", "n-labelled"} <= drawn
    lines = ("ece", "log-loss", "mean-predicted", "observed-rate", "psi", "ks")
    expectations = ("estimated-accuracy", "realized-accuracy", "estimated-prior", "training-prior")
    bands = ("estimated-accuracy-band", "estimated-prior-band")
    for key in (*lines, *expectations, *bands):
        assert {i for i in drawn if i.startswith(f"{key}-v")} == {f"{key}-v1", f"{key}-v2"}
    assert not any(i.endswith("-empty") for i in drawn)
    title = "churn · 1h windows · 2026-11-20 00:00 to 2026-11-20 03:00 UTC"
    assert title in texts(r.content)
    again = shared_app.get(f"{BASE}/monitoring.svg", params=HOURS)
    assert again.content == r.content  # no random ids

    one = shared_app.get(f"{BASE}/monitoring.svg", params={**HOURS, "version": "2"})
    assert {i for i in ids(one.content) if i.startswith("ece-v")} == {"ece-v2"}
    assert any("version 2" in text for text in texts(one.content))


def test_a_range_without_traffic_draws_empty_panels(client: TestClient) -> None:
    assert client.post(f"{BASE}/fit", json=sigmoid_batch()).status_code == 201
    r = client.get(f"{BASE}/monitoring.svg", params=HOURS)
    assert r.status_code == 200, r.text
    drawn = ids(r.content)
    panels = ("calibration", "rates", "shift", "expected", "prior", "traffic")
    assert {f"{panel}-empty" for panel in panels} <= drawn
    assert not any(i.startswith("ece-v") for i in drawn)
    assert texts(r.content).count("no traffic") == 6
    png = client.get(f"{BASE}/monitoring.png")  # the default range: 30 days, none of it logged
    with Image.open(io.BytesIO(png.content)) as image:
        assert image.size == (1000, 1400)


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
@pytest.mark.usefixtures("logged")  # churn, whose pictures are asked
def test_pictures_refuse_a_bad_query(
    shared_app: TestClient, suffix: str, params: dict[str, str], status: int, fragment: str
) -> None:
    assert_problem(shared_app.get(f"{BASE}/monitoring.{suffix}", params=params), status, fragment)


def test_pictures_of_an_unknown_calibrator_are_not_found(shared_app: TestClient) -> None:
    assert_problem(shared_app.get("/v1/calibrators/nobody/monitoring.png"), 404, "nobody")
    assert_problem(shared_app.get("/v1/calibrators/nobody/monitoring.svg"), 404, "nobody")


# -- the diagnostics of the labelled traffic -----------------------------------------------------


def test_diagnostics_of_one_version_equal_posting_its_labelled_traffic(
    shared_app: TestClient, logged: Drawn
) -> None:
    params = {"since": HOURS["since"], "until": HOURS["until"], "version": "1", **FEW}
    for options in ({}, {"n_bins": 20, "strategy": "quantile"}, {"class_index": 0}):
        r = shared_app.get(f"{BASE}/monitoring/diagnostics", params={**params, **options})
        assert r.status_code == 200, r.text
        got = r.json()
        body = {
            "scores": logged[1]["scores"].tolist(),
            "labels": logged[1]["labels"].tolist(),
            **FEW,
            **options,
        }
        posted = shared_app.post(f"{BASE}/versions/1/diagnostics", json=body).json()
        assert {k: got[k] for k in posted} == posted  # every number, every bin, exactly
        assert got["n_labelled"] == got["n_samples"] == 75
        assert (got["since"], got["until"]) == ("2026-11-20T00:00:00Z", "2026-11-20T03:00:00Z")


def test_diagnostics_of_every_version_against_scikit_learn(
    shared_app: TestClient, logged: Drawn
) -> None:
    params = {"since": HOURS["since"], "until": HOURS["until"]}  # the default bootstrap
    r = shared_app.get(f"{BASE}/monitoring/diagnostics", params=params)
    assert r.status_code == 200, r.text
    got = r.json()
    p = np.concatenate([logged[v]["probabilities"] for v in (1, 2)])
    y = np.concatenate([logged[v]["labels"] for v in (1, 2)])
    assert got["version"] is None
    assert got["n_labelled"] == p.size == 150
    metrics = got["calibrated"]["metrics"]
    assert metrics["brier"] == pytest.approx(brier_score_loss(y, p), rel=1e-12)
    assert metrics["log_loss"] == pytest.approx(log_loss(y, p), rel=1e-9)
    assert metrics["ece"] == pytest.approx(ece(p, y), rel=1e-9)
    assert sum(b["count"] for b in got["calibrated"]["bins"]) == 150
    assert {"bins", "metrics", "smooth"} == got["raw"].keys()


def test_the_default_range_is_the_last_30_days(fitted: TestClient) -> None:
    """Logged by predict with ids now, labelled through POST outcomes."""
    batch = sigmoid_batch(40, seed=3)
    ids_ = [f"r{i}" for i in range(40)]
    assert fitted.post(f"{BASE}/predict", json={"scores": batch["scores"], "ids": ids_}).is_success
    fitted.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    outcomes = {"ids": ids_[:30], "labels": batch["labels"][:30]}
    assert fitted.post(f"{BASE}/outcomes", json=outcomes).status_code == 200
    got = fitted.get(f"{BASE}/monitoring/diagnostics", params=FEW).json()
    assert got["n_labelled"] == 30
    until = datetime.fromisoformat(got["until"])
    assert until - datetime.fromisoformat(got["since"]) == timedelta(days=30)
    assert timedelta(0) < until - datetime.now(UTC) <= timedelta(days=1)


def test_no_labelled_traffic_in_the_range_is_not_found(
    client: TestClient, traffic: dict[int, Any]
) -> None:
    later = {"since": (T0 + timedelta(hours=2)).isoformat(), "until": HOURS["until"]}
    assert_problem(
        client.get(f"{BASE}/monitoring/diagnostics", params=later), 404, "no labelled traffic"
    )
    fit = client.post(f"{BASE}/fit", json=sigmoid_batch(200))  # v3, no traffic at all
    assert fit.status_code == 201
    r = client.get(f"{BASE}/monitoring/diagnostics", params={**HOURS, "version": "3"})
    assert_problem(r, 404, "no labelled traffic", "v3")


@pytest.mark.in_threads  # it patches code the job runs
def test_more_labelled_traffic_than_a_batch_may_hold_is_refused_before_it_is_read(
    client: TestClient, traffic: dict[int, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    service = client.app.state.service  # type: ignore[attr-defined]
    assert service.traffic.max_rows == service.settings.max_batch_rows
    monkeypatch.setattr(service.traffic, "max_rows", 149)
    read = []
    monkeypatch.setattr(TrafficReads, "traffic_chunks", lambda *args, **kw: read.append(1))
    params = {"since": HOURS["since"], "until": HOURS["until"], **FEW}
    r = client.get(f"{BASE}/monitoring/diagnostics", params=params)
    assert_problem(r, 413, "150 labelled", "149")
    assert read == []
    monkeypatch.undo()
    monkeypatch.setattr(service.traffic, "max_rows", 150)
    assert client.get(f"{BASE}/monitoring/diagnostics", params=params).status_code == 200


def test_k_class_diagnostics_equal_posting_the_labelled_traffic(client: TestClient) -> None:
    url = "/v1/calibrators/digits"
    batch = logits_batch(300)
    assert client.post(f"{url}/fit", json={**batch, "method": "temperature"}).status_code == 201
    assert_problem(client.get(f"{url}/monitoring/diagnostics?version=1"), 404, "no labelled")
    rows = {"scores": batch["scores"][:40], "ids": [f"k{i}" for i in range(40)]}
    assert client.post(f"{url}/predict", json=rows).status_code == 200
    client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    outcomes = {"ids": rows["ids"][:30], "labels": batch["labels"][:30]}
    assert client.post(f"{url}/outcomes", json=outcomes).status_code == 200
    for options in ({}, {"n_bins": 5, "strategy": "quantile"}, {"class_index": 2}):
        params = {"version": "1", **FEW, **options}
        got = client.get(f"{url}/monitoring/diagnostics", params=params).json()
        body = {"scores": batch["scores"][:30], "labels": batch["labels"][:30], **FEW, **options}
        posted = client.post(f"{url}/versions/1/diagnostics", json=body).json()
        assert {k: got[k] for k in posted} == posted  # every number, every bin, exactly
        assert got["n_labelled"] == got["n_samples"] == 30
        every = client.get(f"{url}/monitoring/diagnostics", params={**FEW, **options}).json()
        assert (every["version"], every["calibrated"]) == (None, got["calibrated"])


@pytest.mark.parametrize(
    ("first", "message"),
    [
        (sigmoid_batch(200), "binary versions (v1)"),
        ({**logits_batch(300, k=4), "method": "temperature"}, "3, 4 classes"),
    ],
)
def test_traffic_of_versions_of_different_classes_is_a_conflict_unless_one_is_chosen(
    client: TestClient, first: dict[str, Any], message: str
) -> None:
    """v1 binary or of 4 classes, v2 of 3 classes."""
    url = "/v1/calibrators/mixed"
    k_class = {**logits_batch(300), "method": "temperature"}
    for body in (first, k_class):
        assert client.post(f"{url}/fit", json=body).status_code == 201
    for version, scores in (("1", first["scores"][:10]), ("2", k_class["scores"][:10])):
        ids_ = [f"v{version}-{i}" for i in range(10)]
        r = client.post(f"{url}/predict?version={version}", json={"scores": scores, "ids": ids_})
        assert r.status_code == 200, r.text
        client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
        outcomes = {"ids": ids_, "labels": [i % 2 for i in range(10)]}
        assert client.post(f"{url}/outcomes", json=outcomes).status_code == 200
    assert_problem(client.get(f"{url}/monitoring/diagnostics"), 409, message)
    for version, multiclass in (("1", "method" in first), ("2", True)):
        params = {"version": version, **FEW}
        got = client.get(f"{url}/monitoring/diagnostics", params=params).json()
        assert (got["version"], got["n_labelled"]) == (int(version), 10)
        assert ("accuracy" in got["calibrated"]["metrics"]) == multiclass  # top-label report


@pytest.mark.parametrize(
    ("params", "status", "fragment"),
    [
        ({"n_bins": "1"}, 422, "n_bins"),
        ({"strategy": "kmeans"}, 422, "strategy"),
        ({"class_index": "2"}, 422, "class_index"),
        ({"since": "2026-11-20T00:00:00Z", "until": "2026-11-20T00:00:00Z"}, 422, "before until"),
        ({"until": "never"}, 422, "until"),
        ({"until": "9999-12-31T23:00:00-05:00"}, 422, "9000-01-01"),
        ({"version": "production"}, 404, "production"),
    ],
)
def test_diagnostics_refuse_a_bad_query(
    shared_app: TestClient,
    logged: Drawn,
    params: dict[str, str],
    status: int,
    fragment: str,
) -> None:
    query = {"since": HOURS["since"], "until": HOURS["until"], **params}
    assert_problem(shared_app.get(f"{BASE}/monitoring/diagnostics", params=query), status, fragment)


def test_diagnostics_of_an_unknown_calibrator_are_not_found(shared_app: TestClient) -> None:
    assert_problem(shared_app.get("/v1/calibrators/nobody/monitoring/diagnostics"), 404, "nobody")


def test_the_routes_are_described(shared_app: TestClient) -> None:
    paths = shared_app.get("/openapi.json").json()["paths"]
    for suffix, media in (("png", "image/png"), ("svg", "image/svg+xml")):
        op = paths[f"/v1/calibrators/{{name}}/monitoring.{suffix}"]["get"]
        assert list(op["responses"]["200"]["content"]) == [media]
        assert "PSI 0.25" in op["description"]
        assert {"window", "since", "until", "version", "n_bins"} <= {
            p["name"] for p in op["parameters"]
        }
    op = paths["/v1/calibrators/{name}/monitoring/diagnostics"]["get"]
    assert "404" in op["description"]
    assert "409" in op["description"]
    assert {"since", "until", "version", "n_bins", "strategy", "class_index"} <= {
        p["name"] for p in op["parameters"]
    }
    schema = op["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["$ref"].endswith("/TrafficDiagnosticsOut")


def test_the_pictures_document_the_json_query_but_bootstrap(shared_app: TestClient) -> None:
    """The figures draw no intervals, so they take no ``bootstrap``; the rest of the JSON
    monitoring's query is theirs."""
    paths = shared_app.get("/openapi.json").json()["paths"]

    def names(path: str) -> set[str]:
        return {p["name"] for p in paths[path]["get"]["parameters"] if p["in"] == "query"}

    json_query = names("/v1/calibrators/{name}/monitoring")
    assert "bootstrap" in json_query
    for picture in ("png", "svg"):
        assert names(f"/v1/calibrators/{{name}}/monitoring.{picture}") == json_query - {"bootstrap"}
