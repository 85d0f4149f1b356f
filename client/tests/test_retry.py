"""The retry policy, against a fake server (``httpx.MockTransport``) and a fake clock: which
failures are tried again, how long the waits are, and that one deadline bounds the call."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
from calibration_client import (
    APIConnectionError,
    APITimeoutError,
    CalibrationError,
    Client,
    NotFoundError,
    RateLimitError,
    ServiceUnavailableError,
    UnprocessableError,
)
from calibration_client._retry import RetryPolicy, retry_after

VERSION = {
    "name": "churn", "version": 1, "method": "platt", "params": {}, "n_samples": 4,
    "n_positive": 2, "n_classes": 2, "created_at": "2026-11-21T22:00:00Z", "description": "",
    "tags": {}, "fitted": {"A": -1.0, "B": 0.0}, "metrics": {}, "selection": None,
    "aliases": [], "source": None,
}  # fmt: skip
PROBLEM = {"type": "/problems/busy", "title": "Busy", "status": 503, "detail": "queue full"}


class FakeTime:
    """A monotonic clock that only sleeps move, plus a record of the sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


Handler = Callable[[httpx.Request], httpx.Response]


def client_with(
    handler: Handler, fake: FakeTime, **options: float
) -> tuple[Client, list[httpx.Request]]:
    """A Client whose requests go to ``handler`` (each one recorded), timed by ``fake``,
    with the largest jitter draw (waits are the backoff's cap at each step)."""
    seen: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    http = httpx.Client(transport=httpx.MockTransport(recording))
    client = Client("http://calibration.test", http_client=http, **options)  # type: ignore[arg-type]
    client._clock = fake.clock
    client._sleep = fake.sleep
    client._uniform = lambda: 1.0
    return client, seen


def busy(headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(503, json=PROBLEM, headers=headers or {})


def test_503_is_retried_with_backoff_then_raised() -> None:
    fake = FakeTime()
    client, seen = client_with(lambda r: busy(), fake, retries=3)
    with pytest.raises(ServiceUnavailableError) as caught:
        client.version("churn", 1)
    assert len(seen) == 4  # the first attempt and three retries
    assert fake.sleeps == [0.5, 1.0, 2.0]  # base 0.5 s doubling, at the top of the jitter
    assert caught.value.detail == "queue full"


def test_success_after_failures_returns_the_answer() -> None:
    fake = FakeTime()
    answers = iter([busy(), httpx.Response(429), httpx.Response(200, json=VERSION)])
    client, seen = client_with(lambda r: next(answers), fake)
    assert client.version("churn", 1).version == 1
    assert len(seen) == 3


def test_backoff_is_capped_and_jittered() -> None:
    policy = RetryPolicy(retries=10)
    assert policy.backoff(10, lambda: 1.0) == 8.0
    assert policy.backoff(2, lambda: 0.25) == 0.5
    assert policy.backoff(0, lambda: 0.0) == 0.0


def test_retry_after_seconds_wins_over_a_shorter_backoff() -> None:
    fake = FakeTime()
    answers = iter([busy({"Retry-After": "3"}), httpx.Response(200, json=VERSION)])
    client, _ = client_with(lambda r: next(answers), fake)
    client.version("churn", 1)
    assert fake.sleeps == [3.0]


def test_retry_after_as_an_http_date() -> None:
    now = datetime(2026, 11, 21, 22, 0, 0, tzinfo=UTC).timestamp()
    date = format_datetime(datetime.fromtimestamp(now + 4, UTC), usegmt=True)
    assert retry_after({"retry-after": date}, now) == pytest.approx(4.0)
    assert retry_after({"retry-after": "soon"}, now) is None
    fake = FakeTime()
    answers = iter(
        [httpx.Response(429, headers={"Retry-After": date}), httpx.Response(200, json=VERSION)]
    )
    client, _ = client_with(lambda r: next(answers), fake)
    client._wall = lambda: now
    client.version("churn", 1)
    assert fake.sleeps == [pytest.approx(4.0)]


def test_a_wait_past_the_deadline_raises_at_once() -> None:
    fake = FakeTime()
    client, seen = client_with(lambda r: busy({"Retry-After": "60"}), fake, timeout=10.0)
    with pytest.raises(ServiceUnavailableError):
        client.version("churn", 1)
    assert len(seen) == 1
    assert fake.sleeps == []


def test_the_whole_call_stays_within_its_timeout() -> None:
    """Each attempt takes 2 s of the fake clock; the waits and attempts together never pass
    the 10 s timeout, and each attempt's httpx timeout is the time left."""
    fake = FakeTime()
    start = fake.now
    left: list[float] = []

    def slow_busy(request: httpx.Request) -> httpx.Response:
        timeout = request.extensions["timeout"]["read"]
        left.append(timeout)
        if timeout < 2.0:  # as httpx does: the attempt ends at its timeout
            fake.now += timeout
            raise httpx.ReadTimeout("slow", request=request)
        fake.now += 2.0
        return busy()

    client, seen = client_with(slow_busy, fake, timeout=10.0, retries=10)
    with pytest.raises(CalibrationError):
        client.version("churn", 1)
    assert fake.now - start <= 10.0
    assert left[0] == 10.0
    assert all(a > b for a, b in itertools.pairwise(left))
    assert 1 < len(seen) < 11


def test_per_call_timeout_overrides_the_clients() -> None:
    fake = FakeTime()
    client, seen = client_with(lambda r: busy({"Retry-After": "5"}), fake, timeout=100.0)
    with pytest.raises(ServiceUnavailableError):
        client.version("churn", 1, timeout=4.0)
    assert len(seen) == 1
    assert seen[0].extensions["timeout"]["connect"] == 4.0


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422, 500])
def test_other_errors_are_not_retried(status: int) -> None:
    fake = FakeTime()
    client, seen = client_with(lambda r: httpx.Response(status, json={"status": status}), fake)
    with pytest.raises(CalibrationError) as caught:
        client.version("churn", 1)
    assert len(seen) == 1
    assert caught.value.status == status


def test_connection_errors_are_retried_then_raised() -> None:
    fake = FakeTime()

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client, seen = client_with(refuse, fake, retries=2)
    with pytest.raises(APIConnectionError) as caught:
        client.versions("churn")
    assert len(seen) == 3
    assert caught.value.status is None
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_a_read_timeout_is_an_api_timeout_error() -> None:
    fake = FakeTime()

    def stall(request: httpx.Request) -> httpx.Response:
        fake.now += 5.0  # the attempt used all the time it had
        raise httpx.ReadTimeout("slow", request=request)

    client, seen = client_with(stall, fake, timeout=5.0)
    with pytest.raises(APITimeoutError):
        client.version("churn", 1)
    assert len(seen) == 1


def test_a_fit_always_carries_one_key_across_its_attempts() -> None:
    fake = FakeTime()
    answers = iter([busy(), busy(), httpx.Response(201, json=VERSION)])
    client, seen = client_with(lambda r: next(answers), fake)
    client.fit("churn", [0.1, 0.2, 0.7, 0.9], [0, 0, 1, 1])
    keys = {request.headers["Idempotency-Key"] for request in seen}
    assert len(seen) == 3
    assert len(keys) == 1
    assert next(iter(keys)).startswith("fit-")
    assert len({r.content for r in seen}) == 1  # the same bytes each time


def test_a_fit_read_timeout_is_retried_under_its_key() -> None:
    fake = FakeTime()
    lost = iter([True, False])

    def flaky(request: httpx.Request) -> httpx.Response:
        if next(lost):  # processed, maybe, but the answer never came
            raise httpx.ReadTimeout("lost", request=request)
        return httpx.Response(200, json=VERSION)

    client, seen = client_with(flaky, fake)
    version = client.fit("churn", [0.1, 0.9], [0, 1], idempotency_key="weekly-2026-47")
    assert version.version == 1
    assert [r.headers["Idempotency-Key"] for r in seen] == ["weekly-2026-47"] * 2


def test_two_fits_get_two_keys() -> None:
    fake = FakeTime()
    client, seen = client_with(lambda r: httpx.Response(201, json=VERSION), fake)
    client.fit("churn", [0.1, 0.9], [0, 1])
    client.fit("churn", [0.1, 0.9], [0, 1])
    assert seen[0].headers["Idempotency-Key"] != seen[1].headers["Idempotency-Key"]


@pytest.mark.parametrize("key", ["", "x" * 129, "tab\there", "é"])
def test_a_bad_idempotency_key_is_refused_before_sending(key: str) -> None:
    fake = FakeTime()
    client, seen = client_with(lambda r: httpx.Response(201, json=VERSION), fake)
    with pytest.raises(ValueError, match="idempotency_key"):
        client.fit("churn", [0.1, 0.9], [0, 1], idempotency_key=key)
    assert seen == []


@pytest.mark.parametrize(
    ("status", "kind"), [(404, NotFoundError), (422, UnprocessableError), (429, RateLimitError)]
)
def test_errors_of_other_families_map_to_their_classes(
    status: int, kind: type[CalibrationError]
) -> None:
    client, _ = client_with(lambda r: httpx.Response(status), FakeTime(), retries=0)
    with pytest.raises(kind):
        client.version("churn", 1)


def test_headers_key_and_user_agent() -> None:
    fake = FakeTime()
    client, seen = client_with(lambda r: httpx.Response(200, json=VERSION), fake)
    client.api_key = "secret"
    client.version("churn", "production")
    assert seen[0].headers["Authorization"] == "Bearer secret"
    assert seen[0].headers["User-Agent"].startswith("calibration-client/")
    assert seen[0].url.path == "/v1/calibrators/churn/versions/production"


def test_a_client_closes_only_its_own_http_client() -> None:
    http = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    with Client(http_client=http):
        pass
    assert not http.is_closed
    with Client() as own:
        pass
    assert own._http.is_closed
    http.close()
