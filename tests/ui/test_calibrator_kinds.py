"""A calibrator's page for each kind of version, against the API's JSON: ``auto``'s choice
and why, a k-class version's smooth and binned diagrams, an adjusted version (its priors), and
compare's words for a binary against a k-class version."""

from __future__ import annotations

import re

import pytest

from tests.api.helpers import three_class_batch
from tests.client import TestClient

from .conftest import fit
from .html_checks import parse, table_rows
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
    rows = table_rows(parse(open_client.get("/ui/calibrators/moved").text), "Versions")
    assert [row[1] for row in rows[1:]] == ["platt (v1 adjusted)", "platt"]
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


def test_a_calibrator_without_versions_says_so_and_links_nowhere_dead(
    open_client: TestClient,
) -> None:
    fit(open_client, "emptied", "platt")
    open_client.put("/v1/calibrators/emptied/aliases/production", json={"version": 1})
    gone = open_client.delete("/v1/calibrators/emptied/versions/1", params={"force": "true"})
    assert gone.status_code == 204, gone.text
    page = open_client.get("/ui/calibrators/emptied")
    assert page.status_code == 200
    assert "emptied has no versions left" in page.text
    links = [a.attrs["href"] for a in parse(page.text).all("a")]
    assert not [link for link in links if "monitoring" in link or "compare" in link]
    moves = table_rows(parse(page.text), "The latest 2 moves")
    assert [row[1:] for row in moves[1:]] == [
        ["production", "v1", "(removed)"],
        ["production", "(set)", "v1"],
    ]


def test_a_long_unknown_alias_is_not_echoed_whole(open_client: TestClient) -> None:
    fit(open_client, "echo", "platt")
    page = open_client.get("/ui/calibrators/echo", params={"version": "x" * 5000})
    assert page.status_code == 404
    assert "x" * 128 + "…" in page.text
    assert len(page.text) < 10_000
