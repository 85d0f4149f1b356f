"""The OpenAPI description shows every route of the contract, each body with an example."""

from __future__ import annotations

from app.calibration import METHODS
from tests.client import TestClient


def test_every_route_is_documented_with_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    paths = spec["paths"]
    expected = {
        ("/v1/calibrators/{name}/fit", "post"),
        ("/v1/calibrators/{name}/versions/{selector}", "get"),
        ("/v1/calibrators", "get"),
        ("/v1/calibrators/{name}", "get"),
        ("/v1/calibrators/{name}", "delete"),
        ("/v1/calibrators/{name}/versions/{version}", "delete"),
        ("/v1/calibrators/{name}/predict", "post"),
        ("/v1/calibrators/{name}/versions/{selector}/diagnostics", "get"),
        ("/v1/calibrators/{name}/versions/{selector}/diagnostics", "post"),
        ("/v1/calibrators/{name}/monitoring.png", "get"),
        ("/v1/calibrators/{name}/monitoring.svg", "get"),
        ("/v1/calibrators/{name}/monitoring/diagnostics", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
    }
    documented = {(p, m) for p, ops in paths.items() for m in ops}
    assert expected <= documented
    for path, method in expected:
        op = paths[path][method]
        if "requestBody" in op:
            for media, content in op["requestBody"]["content"].items():
                if media != "multipart/form-data" and content["schema"].get("format") != "binary":
                    assert "example" in content or content["examples"], (path, method, media)
        if path.startswith("/v1"):
            assert "422" in op["responses"] or method == "delete", (path, method)
            assert "application/problem+json" in op["responses"]["404"]["content"]
    batch_types = {
        "application/json",
        "text/csv",
        "application/vnd.apache.parquet",
        "application/vnd.apache.arrow.stream",
        "multipart/form-data",
    }
    for path, form_fields in (
        ("/v1/calibrators/{name}/fit", {"method", "params", "description", "tags"}),
        ("/v1/calibrators/{name}/versions/{selector}/diagnostics", {"n_bins", "strategy"}),
        ("/v1/calibrators/{name}/compare", {"versions"}),
    ):
        body = paths[path]["post"]["requestBody"]["content"]
        assert batch_types <= body.keys(), path
        assert {"file", *form_fields} <= body["multipart/form-data"]["schema"]["properties"].keys()


def test_reports_on_a_file_take_their_options_from_the_query(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    diagnostics = paths["/v1/calibrators/{name}/versions/{selector}/diagnostics"]["post"]
    query = {p["name"]: p for p in diagnostics["parameters"] if p["in"] == "query"}
    assert query.keys() == {"n_bins", "strategy", "class_index", "bootstrap", "curve"}
    assert "multipart form" in diagnostics["description"]
    compare = paths["/v1/calibrators/{name}/compare"]["post"]
    versions = next(p for p in compare["parameters"] if p["name"] == "versions")
    assert versions["schema"]["anyOf"][0]["type"] == "array"
    assert "?versions=1&versions=production" in versions["description"]
    assert client.get("/docs").status_code == 200


def test_the_predict_body_documents_intervals_and_fit_every_method(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()

    def body(path: str) -> dict[str, object]:
        content = spec["paths"][path]["post"]["requestBody"]["content"]
        schema: dict[str, object] = content["application/json"]["schema"]
        return schema

    predict = body("/v1/calibrators/{name}/predict")
    assert predict["additionalProperties"] is False
    assert predict["properties"]["intervals"]["type"] == "boolean"  # type: ignore[index]
    choices = body("/v1/calibrators/{name}/fit")["anyOf"]
    batch, traffic = choices  # type: ignore[misc]
    for fit in (batch, traffic):
        described = fit["properties"]["method"]["description"]
        assert all(method in described for method in METHODS)
    assert traffic["properties"]["from_traffic"]["properties"]["since"]["anyOf"][0] == {
        "format": "date-time",
        "type": "string",
    }
    answer = spec["components"]["schemas"]["PredictOut"]["properties"]["intervals"]
    assert "anyOf" in answer
