"""The compare page on both backends: versions picked from select lists, and the verdict the
compare route's code reaches, in words, on the labelled pairs the page says it rests on."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from app.service.verdicts import MIN_TRAFFIC
from app.ui.templating import number
from demo.server import LocalService
from tests.api.helpers import sigmoid_batch
from tests.browser import Browser, chromium
from tests.client import TestClient

from .conftest import fit
from .html_checks import Parsed, parse
from .test_accessibility import check_page

PAGE = "/ui/calibrators/churn/compare"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    """Both backends (the package's conftest keeps the web view's other tests on SQLite)."""
    return str(request.param)


def fit_batch(client: TestClient, method: str, batch: dict[str, Any]) -> None:
    """Fit ``churn`` on ``batch`` through the API."""
    answer = client.post("/v1/calibrators/churn/fit", json={**batch, "method": method})
    assert answer.status_code == 201, answer.text


def options(parsed: Parsed) -> dict[str, list[tuple[str, str, bool]]]:
    """Each select's options by the select's id: (value, text, selected)."""
    found: dict[str, list[tuple[str, str, bool]]] = {}
    current = None
    for element in parsed.elements:
        if element.tag == "select":
            current = found.setdefault(element.attrs["id"], [])
        elif element.tag == "option" and current is not None:
            text = " ".join(element.text.split())
            current.append((element.attrs["value"], text, "selected" in element.attrs))
    return found


def verdict_of(html: str) -> tuple[str, str]:
    """The verdict sentence and what it rests on, as the page reads."""
    parsed = parse(html)
    (sentence,) = [e.text for e in parsed.all("p") if e.attrs.get("class") == "verdict"]
    heading = parsed.text.index("Verdict")
    basis = parsed.text[heading:].split(sentence)[1].strip().split("\n")[0]
    return " ".join(sentence.split()), basis


def said(document: dict[str, Any]) -> str:
    """The verdict sentence the page should write for a compare route's answer of two."""
    best, other = document["versions"]
    gap, (low, high) = other["difference"]["value"], other["difference"]["interval"]
    return (
        f"v{best['version']} ({best['method']}) has the lower log loss on "
        f"{{on}}: {number(best['metrics']['log_loss'])} against "
        f"{number(other['metrics']['log_loss'])} for v{other['version']} ({other['method']}); "
        f"the gap, {number(gap)} [{number(low)}, {number(high)}], is "
        + (
            f"significant (paired bootstrap, {document['bootstrap']} resamples)."
            if other["significant"]
            else f"not significant: the interval includes 0 (paired bootstrap, "
            f"{document['bootstrap']} resamples)."
        )
    )


def test_the_selects_hold_every_version_and_alias(open_client: TestClient) -> None:
    for method in ("platt", "isotonic", "platt"):
        fit(open_client, "churn", method)
    for alias, version in (("production", 2), ("staging", 1)):
        moved = open_client.put(f"/v1/calibrators/churn/aliases/{alias}", json={"version": version})
        assert moved.status_code == 200, moved.text
    page = open_client.get(PAGE)
    assert page.status_code == 200
    parsed = parse(page.text)
    check_page(parsed, PAGE)
    labels = {e.attrs["for"]: " ".join(e.text.split()) for e in parsed.all("label")}
    assert labels == {"a": "First version", "b": "Second version"}
    assert not parsed.all("input")  # nothing to type
    (form,) = parsed.all("form")
    assert form.attrs["method"] == "get"
    listed = options(parsed)
    created = {
        v: open_client.get(f"/v1/calibrators/churn/versions/{v}").json()["created_at"][:16]
        for v in (1, 2, 3)
    }
    expected = [
        ("3", f"v3 · platt · {created[3].replace('T', ' ')} UTC"),
        ("2", f"v2 · isotonic · {created[2].replace('T', ' ')} UTC"),
        ("1", f"v1 · platt · {created[1].replace('T', ' ')} UTC"),
        ("production", "production → v2"),
        ("staging", "staging → v1"),
        ("latest", "latest → v3"),
    ]
    for field, chosen in (("a", "production"), ("b", "3")):  # production against the newest other
        assert [(value, text) for value, text, _ in listed[field]] == expected
        assert [value for value, _, selected in listed[field] if selected] == [chosen]
    again = options(parse(open_client.get(PAGE, params={"a": "staging", "b": "latest"}).text))
    assert [value for value, _, selected in again["a"] if selected] == ["staging"]
    assert [value for value, _, selected in again["b"] if selected] == ["latest"]


def test_the_verdict_on_traffic_is_the_compare_routes_on_those_pairs(
    open_client: TestClient,
) -> None:
    """v1 is fitted on labels of another model, v2 on the model the traffic follows: on the
    traffic logged since v2, v2 wins significantly, by the numbers ``POST …/compare`` answers
    for the same pairs."""
    fit_batch(open_client, "platt", sigmoid_batch(seed=3, a=-0.5))
    fit_batch(open_client, "isotonic", sigmoid_batch(seed=4))
    traffic = sigmoid_batch(n=2 * MIN_TRAFFIC, seed=7)
    ids = [f"r{i}" for i in range(len(traffic["scores"]))]
    served = open_client.post(
        "/v1/calibrators/churn/predict", json={"scores": traffic["scores"], "ids": ids}
    )
    assert served.status_code == 200, served.text
    open_client.app.state.service.prediction_log.flush()  # type: ignore[attr-defined]
    labelled = open_client.post(
        "/v1/calibrators/churn/outcomes", json={"ids": ids, "labels": traffic["labels"]}
    )
    assert labelled.json()["matched"] == len(ids), labelled.text
    page = open_client.get(PAGE, params={"a": "1", "b": "2"})
    assert page.status_code == 200
    sentence, basis = verdict_of(page.text)
    # the pairs as a refit reads them: by score, then label
    scores, labels = np.array(traffic["scores"]), np.array(traffic["labels"])
    order = np.lexsort((labels, scores))
    batch = {"scores": scores[order].tolist(), "labels": labels[order].tolist()}
    answer = open_client.post(
        "/v1/calibrators/churn/compare", params={"versions": ["1", "2"]}, json=batch
    )
    assert answer.status_code == 200, answer.text
    document = answer.json()
    assert document["versions"][0]["version"] == 2
    assert document["versions"][1]["significant"] is True
    on = f"{2 * MIN_TRAFFIC} labelled predictions of traffic"
    assert sentence == said(document).format(on=on)
    assert (
        f"rests on the {2 * MIN_TRAFFIC} labelled predictions logged since v2 was created" in basis
    )


def test_without_traffic_the_verdict_rests_on_both_fitting_batches_out_of_sample(
    open_client: TestClient,
) -> None:
    """Each version out of fold on its own batch, by its calibrator on the other's: its log
    loss is the rows' average of its diagnostics (out of fold) and of the compare route's
    on the other batch. Two Platt fits of one model differ by less than the noise."""
    first, second = sigmoid_batch(), sigmoid_batch(n=300, seed=5)
    fit_batch(open_client, "platt", first)
    fit_batch(open_client, "platt", second)
    page = open_client.get(PAGE, params={"a": "1", "b": "2"})
    assert page.status_code == 200
    sentence, basis = verdict_of(page.text)
    assert "is not significant: the interval includes 0 (paired bootstrap, 1000 resamples)" in (
        sentence
    )
    assert "No labelled predictions have been logged since v2 was created" in basis
    assert "700 labelled pairs of both fitting batches (400 of v1's, 300 of v2's)" in basis
    losses = {}
    for version, own, other in ((1, first, second), (2, second, first)):
        url = f"/v1/calibrators/churn/versions/{version}/diagnostics"
        out_of_fold = open_client.get(url).json()["calibrated"]["metrics"]["log_loss"]
        on_other = open_client.post(
            "/v1/calibrators/churn/compare", params={"versions": [str(version)]}, json=other
        ).json()["versions"][0]["metrics"]["log_loss"]
        n, m = len(own["labels"]), len(other["labels"])
        losses[version] = (n * out_of_fold + m * on_other) / (n + m)
    best, worst = sorted(losses, key=losses.__getitem__)
    assert sentence.startswith(
        f"v{best} (platt) has the lower log loss on the 700 pairs of their two fitting "
        f"batches: {number(losses[best])} against {number(losses[worst])} for v{worst} (platt); "
        f"the gap, {number(losses[worst] - losses[best])} ["
    )


def test_a_verdict_is_significant_when_the_interval_excludes_0(open_client: TestClient) -> None:
    """Versions fitted on opposite models: each is far worse on the other's batch."""
    fit_batch(open_client, "platt", sigmoid_batch())
    fit_batch(open_client, "platt", sigmoid_batch(seed=3, a=-0.5))
    sentence, _ = verdict_of(open_client.get(PAGE, params={"a": "1", "b": "2"}).text)
    assert sentence.endswith("is significant (paired bootstrap, 1000 resamples).")
    gap = re.search(r"the gap, ([0-9.]+) \[([0-9.]+), ([0-9.]+)\]", sentence)
    assert gap is not None
    assert 0 < float(gap[2]) <= float(gap[1]) <= float(gap[3])


def test_a_shared_fitting_batch_is_scored_out_of_fold_for_both(open_client: TestClient) -> None:
    fit(open_client, "churn", "platt")
    fit(open_client, "churn", "isotonic")
    page = open_client.get(PAGE, params={"a": "1", "b": "2"})
    sentence, basis = verdict_of(page.text)
    assert "on the 400 pairs of their shared fitting batch" in sentence
    assert "fitting batch both versions share, each version scored by its out-of-fold" in basis
    for version in (1, 2):  # the same numbers as the tables: the versions' own reports
        url = f"/v1/calibrators/churn/versions/{version}/diagnostics"
        report = open_client.get(url).json()
        assert number(report["calibrated"]["metrics"]["log_loss"]) in sentence


def test_an_adjusted_version_and_its_parent_share_one_batch_weighted_as_the_parent(
    open_client: TestClient,
) -> None:
    """Its batch is its parent's with other weights: one copy, out of fold for both, read
    with the parent's weights (it was 800 pairs, each version's calibrator in sample)."""
    fit(open_client, "churn", "platt")
    adjusted = open_client.post("/v1/calibrators/churn/versions/1/adjust", json={"prior": 0.2})
    assert adjusted.status_code == 201, adjusted.text
    sentence, basis = verdict_of(open_client.get(PAGE, params={"a": "1", "b": "2"}).text)
    assert "on the 400 pairs of their shared fitting batch" in sentence
    assert "weighted as v1 was fitted" in basis
    report = open_client.get("/v1/calibrators/churn/versions/1/diagnostics").json()
    assert number(report["calibrated"]["metrics"]["log_loss"]) in sentence


@pytest.mark.parametrize(
    ("query", "status", "said"),
    [
        ({"a": "1", "b": "nope"}, 404, "alias &#39;nope&#39; of &#39;churn&#39; not found"),
        ({"a": "7", "b": "1"}, 404, "version 7"),
        ({"a": "%00", "b": "1"}, 404, "not found"),
        ({"a": "1", "b": "staging"}, 200, "No verdict: 1 and staging are the same version, v1"),
    ],
)
def test_bad_selections_answer_the_html_pages(
    open_client: TestClient, query: dict[str, str], status: int, said: str
) -> None:
    fit(open_client, "churn", "platt")
    fit(open_client, "churn", "isotonic")
    open_client.put("/v1/calibrators/churn/aliases/staging", json={"version": 1})
    page = open_client.get(PAGE, params=query)
    assert page.status_code == status
    assert page.headers["content-type"].startswith("text/html")
    assert said in page.text
    check_page(parse(page.text), PAGE)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    """``python -m app.serve`` on a loopback port without keys, ``churn`` v1 (Platt) and v2
    (isotonic) fitted on one batch; its base URL."""
    chromium()  # skip before starting a service for nothing
    service = LocalService()
    try:
        service.wait_until_ready()
        for method in ("platt", "isotonic"):
            fitted = httpx.post(
                f"{service.base_url}/v1/calibrators/churn/fit",
                json={**sigmoid_batch(), "method": method},
                timeout=60,
            )
            assert fitted.status_code == 201, fitted.text
        yield service.base_url
    finally:
        service.stop()


def test_a_person_picks_two_versions_and_reads_the_verdict(browser: Browser, served: str) -> None:
    """The default pair is the latest against the one before; picking v1 against v2 in the
    selects and submitting shows the verdict on their shared batch, with their out-of-fold
    log losses, the ones the tables beneath show."""
    assert browser.navigate(f"{served}{PAGE}") == f"{served}{PAGE}"
    assert browser.evaluate("[a.value, b.value].join(' ')") == "2 1"
    browser.evaluate("document.getElementById('a').value = '1'")
    assert browser.submit("b", "2") == f"{served}{PAGE}?a=1&b=2"
    seen = browser.evaluate("document.querySelector('p.verdict').innerText")
    assert browser.evaluate("document.querySelector('p.verdict').offsetHeight") > 0
    losses = {
        version: httpx.get(f"{served}/v1/calibrators/churn/versions/{version}/diagnostics").json()[
            "calibrated"
        ]["metrics"]["log_loss"]
        for version in (1, 2)
    }
    best, worst = sorted(losses, key=losses.__getitem__)
    methods = {1: "platt", 2: "isotonic"}
    pattern = (
        rf"v{best} \({methods[best]}\) has the lower log loss on the 400 pairs of their shared "
        rf"fitting batch: {number(losses[best])} against {number(losses[worst])} for v{worst} "
        rf"\({methods[worst]}\); the gap, {number(losses[worst] - losses[best])} "
        r"\[-?[0-9.]+, [0-9.]+\], is (significant|not significant: the interval includes 0) "
        r"\(paired bootstrap, 1000 resamples\)\."
    )
    assert re.fullmatch(pattern, seen), seen
