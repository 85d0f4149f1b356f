"""Identical report requests in flight at once share one job (app.service.inflight): eight
dashboards asking for one version's diagnostics, or its diagram, compute it once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from app.api.routes import diagnostics
from app.calibration.measures.report_bootstrap import LARGE_ROWS
from app.errors import OverBudget
from app.service.diagnosis import Diagnosis
from app.service.inflight import InFlight
from app.service.reporting import ReportOptions
from tests.api.helpers import sigmoid_batch, three_class_batch
from tests.client import TestClient

REQUESTS = 8


def spy_on_jobs(
    monkeypatch: pytest.MonkeyPatch, client: TestClient, job: str, arrivals: int
) -> list[tuple[Any, ...]]:
    """Record each call of the route's job ``job`` (a name in app.api.routes.diagnostics);
    each call waits until the app's in-flight map has been reached ``arrivals`` times (once
    per request, or twice for one that waits for a version's first report and then runs its
    own), so that all are there while the first job runs, however the threads are scheduled."""
    flight: InFlight = client.app.state.service.work.in_flight  # type: ignore[attr-defined]
    arrived = threading.Condition()
    count = 0
    original_run = flight.run

    async def counted_run(*args: Any, **kwargs: Any) -> Any:
        nonlocal count
        with arrived:
            count += 1
            arrived.notify_all()
        return await original_run(*args, **kwargs)

    monkeypatch.setattr(flight, "run", counted_run)
    calls: list[tuple[Any, ...]] = []
    real: Callable[..., Any] = getattr(diagnostics, job)

    def spy(*args: Any) -> Any:
        calls.append(args[1:])
        with arrived:
            assert arrived.wait_for(lambda: count >= arrivals, timeout=60), "not all arrived"
        return real(*args)

    monkeypatch.setattr(diagnostics, job, spy)
    return calls


def send_together(client: TestClient, urls: list[str]) -> list[Any]:
    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(client.get, urls))


@pytest.mark.in_threads  # it spies on what the job runs
def test_identical_diagnostics_in_flight_are_computed_once(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = spy_on_jobs(monkeypatch, fitted, "_stored", REQUESTS)
    # "latest" and "1" name the same version: the job is keyed by its number
    urls = [
        f"/v1/calibrators/churn/versions/{selector}/diagnostics?n_bins=7&bootstrap=50"
        for selector in ["1", "latest"] * (REQUESTS // 2)
    ]
    answers = send_together(fitted, urls)
    assert [a.status_code for a in answers] == [200] * REQUESTS
    assert all(a.json() == answers[0].json() for a in answers)
    assert len(calls) == 1
    assert len(fitted.app.state.service.work.in_flight) == 0  # type: ignore[attr-defined]


@pytest.mark.in_threads  # it spies on what the job runs
def test_different_queries_in_flight_each_run_their_own_job(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Below LARGE_ROWS rows no parts are shared between bins: each runs at once."""
    calls = spy_on_jobs(monkeypatch, fitted, "_stored", 4)
    base = "/v1/calibrators/churn/versions/latest/diagnostics?bootstrap=50"
    urls = [f"{base}&n_bins={bins}" for bins in (5, 6, 5, 6)]
    answers = send_together(fitted, urls)
    assert [a.status_code for a in answers] == [200] * 4
    assert answers[0].json() == answers[2].json()
    assert answers[0].json() != answers[1].json()
    assert sorted(call[2].n_bins for call in calls) == [5, 6]


@pytest.mark.in_threads  # it spies on what the job runs
def test_identical_diagrams_in_flight_are_drawn_once(
    fitted: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = spy_on_jobs(monkeypatch, fitted, "_stored_picture", REQUESTS)
    url = "/v1/calibrators/churn/versions/1/diagnostics.svg?bootstrap=50"
    answers = send_together(fitted, [url] * REQUESTS)
    assert [a.status_code for a in answers] == [200] * REQUESTS
    assert len({a.content for a in answers}) == 1
    assert len(calls) == 1


@pytest.mark.in_threads  # it spies on what the job runs
def test_other_bins_in_flight_wait_for_the_first_report_and_bin_from_its_parts(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dashboard's four bin counts of a large version at once: the first is reported whole,
    the others wait for it and then compute their bins only (from the parts it kept), and
    each answer is the one a server that saw no other query gives."""
    n = LARGE_ROWS + 1_000  # the parts serve from there (below, a report is whole and cheap)
    fit = client.post(
        "/v1/calibrators/big/fit", json={**sigmoid_batch(n, seed=3), "method": "isotonic"}
    )
    assert fit.status_code == 201, fit.text
    calls = spy_on_jobs(monkeypatch, client, "_stored", 4)
    base = "/v1/calibrators/big/versions/latest/diagnostics?bootstrap=40"
    bins = [8, 11, 14, 17]
    answers = send_together(client, [f"{base}&n_bins={b}&strategy=quantile" for b in bins])
    assert [a.status_code for a in answers] == [200] * 4
    assert len(calls) == 4
    assert [call[3] is None for call in calls].count(True) == 1  # one report made whole
    service = client.app.state.service  # type: ignore[attr-defined]
    alone = Diagnosis(service.database, service.versions)  # keeps nothing of the others'
    for b, answer in zip(bins, answers, strict=True):
        query = ReportOptions(n_bins=b, strategy="quantile", bootstrap=40)
        expected = diagnostics._diagnostics(alone.stored("big", 1, query), query)
        assert answer.content == expected.body
        assert len(answer.json()["calibrated"]["bins"]) == b


@pytest.mark.in_threads  # it makes the route's job fail
@pytest.mark.parametrize("failure", ["budget", "class"])
def test_requests_waiting_for_a_first_report_fail_as_it_fails(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    """Two bin counts of a large version at once, the first report made whole failing (over
    its budget, or a class the version does not have): the other fails with it, and does not
    spend the job again."""
    fit = client.post(
        "/v1/calibrators/big/fit",
        json={**sigmoid_batch(LARGE_ROWS + 1_000, seed=4), "method": "platt"},
    )
    assert fit.status_code == 201, fit.text
    real = diagnostics._stored

    def over_budget(*args: Any) -> Any:
        raise OverBudget("over its budget")

    monkeypatch.setattr(diagnostics, "_stored", over_budget if failure == "budget" else real)
    calls = spy_on_jobs(monkeypatch, client, "_stored", 2)
    base = "/v1/calibrators/big/versions/latest/diagnostics?bootstrap=20"
    base += "&class_index=5" if failure == "class" else ""
    answers = send_together(client, [f"{base}&n_bins={b}" for b in (8, 9)])
    expected = 503 if failure == "budget" else 422
    assert [a.status_code for a in answers] == [expected, expected]
    assert len(calls) == 1


@pytest.mark.in_threads  # it spies on what the job runs
@pytest.mark.parametrize(
    ("batch", "method", "queries"),
    [
        (
            "multiclass",
            "temperature",
            [(10, None, 30), (12, 1, 30), (7, 1, 30), (15, None, 30), (9, 2, 30)],
        ),
        ("binary, small", "platt", [(10, None, 0), (12, None, 0), (13, None, 40)]),
    ],
)
def test_reports_asked_one_after_another_reuse_their_class_parts_and_answer_as_alone(
    client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    batch: str,
    method: str,
    queries: list[tuple[int, int | None, int]],
) -> None:
    """New bins of a class already reported are binned from its kept parts (a multiclass
    version's top label and each class apart; a small version's only without resamples), and
    each answer is the one a server that saw no other query gives."""
    body = three_class_batch(LARGE_ROWS + 500, 5) if batch == "multiclass" else sigmoid_batch(900)
    assert client.post("/v1/calibrators/v/fit", json={**body, "method": method}).status_code == 201
    calls: list[tuple[Any, ...]] = []
    real = diagnostics._stored
    monkeypatch.setattr(diagnostics, "_stored", lambda *a: (calls.append(a[1:]), real(*a))[1])
    service = client.app.state.service  # type: ignore[attr-defined]
    alone = Diagnosis(service.database, service.versions)
    seen: set[tuple[int | None, int]] = set()
    for bins, class_index, resamples in queries:
        url = f"/v1/calibrators/v/versions/1/diagnostics?n_bins={bins}&bootstrap={resamples}"
        answer = client.get(url + ("" if class_index is None else f"&class_index={class_index}"))
        assert answer.status_code == 200, answer.text
        query = ReportOptions(n_bins=bins, class_index=class_index, bootstrap=resamples)
        assert answer.content == diagnostics._diagnostics(alone.stored("v", 1, query), query).body
        reused = calls[-1][3] is not None
        shared = batch == "multiclass" or resamples == 0
        assert reused == (shared and (class_index, resamples) in seen)
        seen.add((class_index, resamples))
