"""adjust is not retried once its request may have reached the service (the service answers
no Idempotency-Key there, so a second request would store a second version), while a fit,
under its key, and the calls that store nothing are. Against a fake server on a Client and an
AsyncClient (test_adjust_lost_answer.py does it against the live service). Also: the requests
the new calls send, and their answers that cannot be read."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import (
    APIConnectionError,
    APIResponseValidationError,
    APITimeoutError,
    ServiceUnavailableError,
    Version,
)
from client_fakes import VERSION, FakeTime, Serve, busy

ADJUSTED = {**VERSION, "version": 2, "source": {"adjusted": {"parent_version": 1}}}
PERFORMANCE = {"positive_rate": 0.4, "accuracy": 0.8, "intervals": {"accuracy": [0.7, 0.9]}}
PRIOR = {"training": 0.5, "estimated": 0.4, "interval": [0.3, 0.5]}
ESTIMATE = {
    "name": "churn", "version": 1, "n_predictions": 2, "threshold": 0.5,
    "estimated": PERFORMANCE, "prior": PRIOR,
}  # fmt: skip
DECISION = {
    "name": "churn", "version": 1, "threshold": 0.2, "expected_cost": 0.4,
    "intervals": {"expected_cost": [0.3, 0.5]},
    "at_half": {"threshold": 0.5, "expected_cost": 0.6, "intervals": {"expected_cost": [0.5, 0.7]}},
}  # fmt: skip
WINDOW = {
    "start": "2026-11-29T00:00:00Z", "end": "2026-11-30T00:00:00Z", "version": 1,
    "n_predictions": 2, "n_labelled": 0, "mean_predicted": None, "observed_rate": None,
    "log_loss": None, "brier": None, "ece": None, "psi": 0.1, "ks": 0.2,
    "estimated": PERFORMANCE, "realized": None, "prior": PRIOR,
}  # fmt: skip
MONITORING = {"name": "churn", "window": "1d", "since": "…", "until": "…", "windows": [WINDOW]}
Failure = Callable[[httpx.Request], httpx.Response]


def dropped(request: httpx.Request) -> httpx.Response:
    """The request went; the connection closed before an answer (the service may have acted)."""
    raise httpx.RemoteProtocolError("Server disconnected without an answer", request=request)


def read_timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("no answer", request=request)


def refused(request: httpx.Request) -> httpx.Response:
    """No connection: not a byte of the request went."""
    raise httpx.ConnectError("refused", request=request)


def then(first: Failure, answer: httpx.Response) -> Failure:
    """A fake server that fails the first request with ``first`` and answers the others."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return first(request) if len(seen) == 1 else answer

    return handler


def adjust(h: Any) -> Any:
    return h.call("adjust", "churn", 1, prior=0.2)


@pytest.mark.parametrize(
    ("failure", "kind"), [(dropped, APIConnectionError), (read_timeout, APITimeoutError)]
)
def test_adjust_is_not_retried_once_its_request_may_have_arrived(
    serve: Serve, failure: Failure, kind: type[Exception]
) -> None:
    h = serve(then(failure, httpx.Response(201, json=ADJUSTED)), FakeTime(), retries=3)
    with pytest.raises(kind) as caught:
        adjust(h)
    assert len(h.seen) == 1
    note = "\n".join(caught.value.__notes__)
    assert "POST /v1/calibrators/churn/versions/1/adjust was not retried" in note


@pytest.mark.parametrize("failure", [dropped, read_timeout])
def test_a_fit_is_retried_under_its_key_after_the_same_failure(
    serve: Serve, failure: Failure
) -> None:
    h = serve(then(failure, httpx.Response(200, json=VERSION)), FakeTime())
    assert h.call("fit", "churn", [0.1, 0.9], [0, 1]).version == 1
    assert len(h.seen) == 2
    assert len({r.headers["Idempotency-Key"] for r in h.seen}) == 1


@pytest.mark.parametrize(
    "answer",
    [
        lambda: refused,  # nothing was sent
        lambda: lambda r: busy({"Retry-After": "1"}),  # the service did nothing: come back
        lambda: lambda r: httpx.Response(429, headers={"Retry-After": "1"}),
    ],
)
def test_adjust_is_retried_when_nothing_was_done(
    serve: Serve, answer: Callable[[], Failure]
) -> None:
    fake = FakeTime()
    h = serve(then(answer(), httpx.Response(201, json=ADJUSTED)), fake)
    made = adjust(h)
    assert isinstance(made, Version)
    assert made.source == {"adjusted": {"parent_version": 1}}
    assert len(h.seen) == 2
    assert h.seen[0].content == h.seen[1].content


def test_a_503_without_retry_after_is_not_retried_for_adjust(serve: Serve) -> None:
    """Not the service's own (it always says when to come back): a proxy's, maybe after the
    request reached the service."""
    h = serve(then(lambda r: busy(), httpx.Response(201, json=ADJUSTED)), FakeTime())
    with pytest.raises(ServiceUnavailableError) as caught:
        adjust(h)
    assert len(h.seen) == 1
    assert not getattr(caught.value, "__notes__", [])  # an answer came: nothing to guess


def test_a_refused_connection_is_retried_until_the_retries_are_spent(serve: Serve) -> None:
    h = serve(refused, FakeTime(), retries=2)
    with pytest.raises(APIConnectionError) as caught:
        adjust(h)
    assert len(h.seen) == 3
    assert not getattr(caught.value, "__notes__", [])  # never sent: nothing was stored


@pytest.mark.parametrize(
    ("operation", "args", "answer"),
    [
        ("estimate", ("churn", [0.1, 0.9]), ESTIMATE),
        ("decision", ("churn",), DECISION),
        ("monitoring", ("churn",), MONITORING),
    ],
)
def test_the_calls_that_store_nothing_are_retried_after_a_drop(
    serve: Serve, operation: str, args: tuple[Any, ...], answer: dict[str, Any]
) -> None:
    h = serve(then(dropped, httpx.Response(200, json=answer)), FakeTime())
    found = h.call(operation, *args)
    documents = [w.document for w in found] if operation == "monitoring" else found.document
    assert documents == answer.get("windows", answer)
    assert len(h.seen) == 2


# the requests sent


def test_the_requests_the_new_calls_send(serve: Serve) -> None:
    answers = iter(
        [httpx.Response(200, json=a) for a in (ESTIMATE, DECISION, MONITORING)]
        + [httpx.Response(201, json=ADJUSTED)] * 2
    )
    h = serve(lambda r: next(answers), FakeTime())
    h.call("estimate", "churn", np.array([0.25, -1.0]), version="production", threshold=0.3)
    h.call("decision", "churn", version=2, cost_fp=1, cost_fn=5, benefit_tp=0.5)
    since = datetime(2026, 11, 1, tzinfo=UTC)
    h.call("monitoring", "a b", window="1h", since=since, until="2026-11-02", version=3)
    h.call("adjust", "churn", "production", prior="traffic", since=since, tags={"k": "v"})
    h.call("adjust", "churn", 1, priors=np.array([0.3, 0.7]), description="d")
    estimate, decision, monitoring, traffic, priors = h.seen
    assert estimate.url.path == "/v1/calibrators/churn/versions/production/estimate"
    assert json.loads(estimate.content) == {"scores": [0.25, -1.0], "threshold": 0.3}
    assert decision.method == "GET"
    assert decision.url.path == "/v1/calibrators/churn/versions/2/decision"
    assert dict(decision.url.params) == {
        "cost_fp": "1.0", "cost_fn": "5.0", "benefit_tp": "0.5", "benefit_tn": "0.0",
    }  # fmt: skip
    assert monitoring.url.raw_path.startswith(b"/v1/calibrators/a%20b/monitoring?")
    assert dict(monitoring.url.params) == {
        "window": "1h", "since": "2026-11-01T00:00:00+00:00", "until": "2026-11-02",
        "version": "3",
    }  # fmt: skip
    assert traffic.url.path == "/v1/calibrators/churn/versions/production/adjust"
    assert traffic.headers["Content-Type"] == "application/json"
    assert "Idempotency-Key" not in traffic.headers  # the service would not read it
    assert json.loads(traffic.content) == {
        "prior": "traffic", "since": "2026-11-01T00:00:00+00:00", "tags": {"k": "v"},
    }  # fmt: skip
    assert json.loads(priors.content) == {"priors": [0.3, 0.7], "description": "d"}


@pytest.mark.parametrize(
    "arguments",
    [
        {"prior": 0.2, "priors": [0.8, 0.2]},
        {},
        {"prior": float("inf")},
        {"priors": [0.5, float("nan")]},
        {"priors": [[0.5, 0.5]]},
    ],
)
def test_what_adjust_refuses_before_sending(serve: Serve, arguments: dict[str, Any]) -> None:
    h = serve(lambda r: httpx.Response(201, json=ADJUSTED), FakeTime())
    with pytest.raises(ValueError, match="prior"):
        h.call("adjust", "churn", 1, **arguments)
    assert h.seen == []


# answers that cannot be read


def _without(document: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in document.items() if k != key}


@pytest.mark.parametrize(
    ("operation", "args", "body"),
    [
        ("estimate", ("churn", [0.1]), _without(ESTIMATE, "prior")),
        ("estimate", ("churn", [0.1]), {**ESTIMATE, "estimated": [1, 2]}),
        ("estimate", ("churn", [0.1]), {**ESTIMATE, "estimated": None}),
        ("estimate", ("churn", [0.1]), {**ESTIMATE, "prior": {**PRIOR, "interval": [0.1]}}),
        ("estimate", ("churn", [0.1]), {**ESTIMATE, "prior": {**PRIOR, "training": [0.2, 0.8]}}),
        ("estimate", ("churn", [0.1]), {**ESTIMATE, "threshold": "high"}),
        ("estimate", ("churn", [0.1]), []),
        ("decision", ("churn",), _without(DECISION, "at_half")),
        ("decision", ("churn",), {**DECISION, "intervals": {}}),
        ("decision", ("churn",), {**DECISION, "expected_cost": None}),
        ("monitoring", ("churn",), {"windows": {"a": 1}}),
        ("monitoring", ("churn",), {"windows": [{**WINDOW, "start": "yesterday"}]}),
        ("monitoring", ("churn",), {"windows": [_without(WINDOW, "n_predictions")]}),
        ("monitoring", ("churn",), {"windows": [{**WINDOW, "intervals": [1, 2]}]}),
        ("monitoring", ("churn",), {"windows": [{**WINDOW, "prior": "high"}]}),
        ("adjust", ("churn", 1), {"name": "churn"}),
    ],
)
def test_answers_that_cannot_be_read(
    serve: Serve, operation: str, args: tuple[Any, ...], body: Any
) -> None:
    h = serve(lambda r: httpx.Response(200, json=body), FakeTime())
    kwargs = {"prior": 0.2} if operation == "adjust" else {}
    with pytest.raises(APIResponseValidationError) as caught:
        h.call(operation, *args, **kwargs)
    assert caught.value.status == 200
    assert len(h.seen) == 1  # never retried
