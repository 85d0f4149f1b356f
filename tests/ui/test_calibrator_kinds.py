"""A calibrator's page for each kind of version, against the API's JSON: ``auto``'s choice
and why, a k-class version's smooth and binned diagrams, an adjusted version (its priors), and
compare's words for a binary against a k-class version."""

from __future__ import annotations

import re

import pytest

from tests.api.helpers import three_class_batch
from tests.client import TestClient

from .conftest import fit
from .html_checks import parse
from .test_calibrator_page import cell, diagram_ids, shown_version


@pytest.mark.in_threads  # few_page_resamples patches what its jobs run
def test_auto_says_what_it_chose_and_why(open_client: TestClient, few_page_resamples: None) -> None:
    document = fit(open_client, "chosen", "auto")
    text = shown_version(parse(open_client.get("/ui/calibrators/chosen").text))
    selection = document["selection"]
    assert re.search(rf"Chosen by auto {selection['chosen']} among", text)
    for candidate, found in selection["candidates"].items():
        assert f"{candidate} (log loss {found['log_loss']:.4f})" in text


@pytest.mark.parametrize("curve", ["smooth", "binned"])
def test_a_k_class_version_shows_its_diagram_and_metrics(
    open_client: TestClient, curve: str
) -> None:
    body = {**three_class_batch(600, 2), "method": "temperature"}
    assert open_client.post("/v1/calibrators/classes/fit", json=body).status_code == 201
    page = parse(open_client.get("/ui/calibrators/classes", params={"curve": curve}).text)
    text = shown_version(page)
    assert text.startswith("Version 1 · temperature Live")
    assert "600 pairs, 3 classes" in text
    drawn = diagram_ids(page)
    assert ("v1-calibrated-smooth" in drawn) == (curve == "smooth")
    assert ("v1-calibrated-curve" in drawn) == (curve == "binned")
    stored = open_client.get("/v1/calibrators/classes/versions/1/diagnostics").json()
    metrics = stored["calibrated"]["metrics"]
    assert cell(metrics["log_loss"], metrics["intervals"]["log_loss"]) in text


@pytest.mark.in_threads  # few_page_resamples patches what its jobs run
def test_an_adjusted_version_shows_its_new_prior_and_compares_with_its_parent(
    open_client: TestClient, few_page_resamples: None
) -> None:
    fit(open_client, "moved", "platt")
    adjusted = open_client.post("/v1/calibrators/moved/versions/1/adjust", json={"prior": 0.2})
    assert adjusted.status_code == 201, adjusted.text
    text = shown_version(parse(open_client.get("/ui/calibrators/moved").text))
    assert text.startswith("Version 2 · platt Live: no alias is set, so latest serves it.")
    source = adjusted.json()["source"]["adjusted"]
    said = f"Adjusted from v1, to the prior 0.2000 (it was fitted under {source['prior_from']:.4f})"
    assert said in text
    stored = open_client.get("/v1/calibrators/moved/versions/2/diagnostics").json()
    metrics = stored["calibrated"]["metrics"]
    assert f"{metrics['log_loss']:.4f}" in text


def test_compare_says_a_binary_and_a_k_class_version_share_no_pairs(
    open_client: TestClient,
) -> None:
    fit(open_client, "mixed", "platt")
    body = {**three_class_batch(300, 4), "method": "temperature"}
    assert open_client.post("/v1/calibrators/mixed/fit", json=body).status_code == 201
    page = open_client.get("/ui/calibrators/mixed/compare", params={"a": "1", "b": "2"})
    assert page.status_code == 200
    assert "No verdict: v1 is binary, v2 has 3 classes: no pairs score both." in " ".join(
        page.text.split()
    )
