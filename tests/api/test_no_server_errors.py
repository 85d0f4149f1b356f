"""Whatever a client sends, the answer is never a 500 (a property over random bodies)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.calibration import METHODS
from tests.client import TestClient

numbers = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.booleans(),
)
json_values = st.recursive(
    st.one_of(st.none(), numbers, st.text(max_size=5)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
vectors = st.one_of(
    st.lists(numbers, max_size=30),
    st.lists(st.lists(numbers, min_size=1, max_size=3), max_size=10),
    json_values,
)
params = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "targets": st.sampled_from(["platt", "hard", "x"]),
            "max_iter": st.one_of(st.integers(-5, 200), json_values),
            "interpolation": st.sampled_from(["linear", "step", 3]),
            "cv": st.one_of(st.integers(-1, 30), json_values),
        },
    ),
    json_values,
)
methods = st.sampled_from(METHODS)
random_bodies = st.fixed_dictionaries(
    {},
    optional={
        "scores": vectors,
        "labels": st.one_of(
            st.lists(st.sampled_from([0, 1, 2, True, 0.5]), max_size=30), json_values
        ),
        "sample_weight": st.one_of(st.lists(numbers, max_size=30), json_values),
        "method": st.one_of(methods, json_values),
        "params": params,
        "tags": json_values,
        "description": json_values,
    },
)


@st.composite
def plausible_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """Well-formed batches with extreme values: they get past parsing into the numerics."""
    n = draw(st.integers(2, 40))
    score = st.one_of(
        st.floats(-1e300, 1e300, allow_nan=False),
        st.sampled_from([0.0, 0.5, 1.0, 1e-300, -1e-300]),
    )
    k = draw(st.sampled_from([1, 1, 3, 4]))  # 1: a binary vector; else an n x k matrix
    if draw(st.booleans()):  # probabilities, which beta and bostrom need
        unit = st.floats(0, 1, exclude_min=True, exclude_max=True)
        if k == 1:
            scores: list[Any] = draw(st.lists(unit, min_size=n, max_size=n))
        else:
            rows = st.lists(unit, min_size=k, max_size=k).map(lambda r: [x / sum(r) for x in r])
            scores = draw(st.lists(rows, min_size=n, max_size=n))
    elif k == 1:
        scores = draw(st.lists(score, min_size=n, max_size=n))
    else:
        scores = draw(st.lists(st.lists(score, min_size=k, max_size=k), min_size=n, max_size=n))
    body: dict[str, Any] = {
        "scores": scores,
        "labels": draw(st.lists(st.integers(0, max(k, 2) - 1), min_size=n, max_size=n)),
        "method": draw(methods),
    }
    if draw(st.booleans()):
        weight = st.one_of(st.floats(0, 1e6), st.just(0.0))
        body["sample_weight"] = draw(st.lists(weight, min_size=n, max_size=n))
    if draw(st.booleans()):
        body["params"] = draw(params)
    return body


fit_bodies = st.one_of(plausible_bodies(), random_bodies)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=fit_bodies, raw=st.binary(max_size=40))
def test_no_fit_predict_or_diagnostics_body_gives_a_server_error(
    client: TestClient, body: dict[str, Any], raw: bytes
) -> None:
    r = client.post("/v1/calibrators/fuzz/fit", json=body)
    assert r.status_code < 500, r.text
    assert r.status_code in (201, 400, 413, 415, 422), r.text
    if r.status_code == 201:
        assert r.json()["n_samples"] == len(body["labels"])
    predict = {k: v for k, v in body.items() if k == "scores"}
    r = client.post("/v1/calibrators/fuzz/predict", json=predict)
    assert r.status_code < 500, r.text
    r = client.post("/v1/calibrators/fuzz/versions/latest/diagnostics", json=body)
    assert r.status_code < 500, r.text
    for kind in ("application/json", "text/csv", "multipart/form-data; boundary=x"):
        r = client.post("/v1/calibrators/fuzz/fit", content=raw, headers={"content-type": kind})
        assert r.status_code in (400, 415, 422), r.text
