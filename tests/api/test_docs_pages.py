"""/docs and /redoc load everything from the service itself, and "Try it out" works."""

from __future__ import annotations

import re

import pytest

from app.api.routes.docs import ASSETS_PATH
from tests.client import TestClient

# src="..." and href="..." of a page, and any absolute URL written anywhere in it.
LINKED = re.compile(r'(?:src|href)="([^"]+)"')
ABSOLUTE = re.compile(r"\b(?:https?:)?//[A-Za-z0-9.-]+")


@pytest.fixture
def backend() -> str:
    return "sqlite"


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_the_docs_pages_name_no_other_host(client: TestClient, page: str) -> None:
    html = client.get(page).text
    assert not ABSOLUTE.findall(html), page
    for url in LINKED.findall(html):
        assert url.startswith(ASSETS_PATH + "/"), url
        asset = client.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 500, url


def test_the_assets_carry_their_licences(client: TestClient) -> None:
    for path in ("swagger/LICENSE", "redoc/redoc.standalone.js.LICENSE.txt"):
        licence = client.get(f"{ASSETS_PATH}/{path}")
        assert licence.status_code == 200, path
    css = client.get(f"{ASSETS_PATH}/swagger/swagger-ui.css")
    assert css.headers["content-type"].startswith("text/css")
    assert client.get(f"{ASSETS_PATH}/nope.js").status_code == 404


def test_swagger_ui_calls_no_validator(client: TestClient) -> None:
    # What the browser test cannot see: offline, a call to the public validator fails
    # silently. (That the key is not stored, and the spec loads, it proves by behaviour.)
    assert '"validatorUrl": null' in client.get("/docs").text


def test_the_docs_follow_a_proxy_prefix(client: TestClient) -> None:
    html = client.get("/docs").text
    prefixed = TestClient(client.app, root_path="/calibration").get("/docs").text
    assert f'src="{ASSETS_PATH}/' in html
    assert f'src="/calibration{ASSETS_PATH}/' in prefixed
    assert "url: '/calibration/openapi.json'" in prefixed


def test_try_it_out_with_the_examples_fits_and_predicts(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    fit_op = paths["/v1/calibrators/{name}/fit"]["post"]
    predict_op = paths["/v1/calibrators/{name}/predict"]["post"]
    name = predict_op["parameters"][0]["schema"]["examples"][0]
    batch = fit_op["requestBody"]["content"]["application/json"]["examples"]["FitBody"]["value"]
    scores = predict_op["requestBody"]["content"]["application/json"]["example"]
    fit = client.post(f"/v1/calibrators/{name}/fit", json=batch)
    assert fit.status_code == 201, fit.text
    predicted = client.post(f"/v1/calibrators/{name}/predict", json=scores)
    assert predicted.status_code == 200, predicted.text
    assert len(predicted.json()["probabilities"]) == len(scores["scores"])
    # A method that needs probabilities (scores in (0, 1)) takes the example too.
    beta = {"scores": [0.1, 0.3, 0.35, 0.6, 0.8, 0.9] * 5, "labels": [0, 0, 1, 0, 1, 1] * 5}
    fit = client.post("/v1/calibrators/probs/fit", json={**beta, "method": "beta"})
    assert fit.status_code == 201, fit.text
    assert client.post("/v1/calibrators/probs/predict", json=scores).status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        "/static/docs/%2e%2e/%2e%2e/settings.py",
        "/static/docs/swagger/..%2f..%2f..%2fapi%2fdocs_pages.py",
        "/static/docs/",
        "/static/docs/swagger",
        "/problems/%00",
        "/problems/" + "x" * 5000,
        "/problems/..%2f..%2fv1%2fcalibrators",
    ],
)
def test_odd_paths_under_the_open_prefixes_are_404s(client: TestClient, path: str) -> None:
    r = client.get(path)
    assert r.status_code == 404, (path, r.status_code)
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "import" not in r.text  # no source file leaks out
