"""The retry policy, against a fake server (``httpx.MockTransport``) and a fake clock, each
test on a :class:`Client` and on an :class:`AsyncClient`: which failures are tried again, how
long the waits are, and that one deadline bounds the call."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx
import pytest
from calibration_client import (
    APIConnectionError,
    APITimeoutError,
    AsyncClient,
    CalibrationError,
    Client,
    NotFoundError,
    RateLimitError,
    ServiceUnavailableError,
    UnprocessableError,
)
from calibration_client._retry import RetryPolicy, retry_after
from client_fakes import VERSION, FakeTime, Serve, busy


def test_503_is_retried_with_backoff_then_raised(serve: Serve) -> None:
    fake = FakeTime()
    h = serve(lambda r: busy(), fake, retries=3)
    with pytest.raises(ServiceUnavailableError) as caught:
        h.call("version", "churn", 1)
    assert len(h.seen) == 4  # the first attempt and three retries
    assert fake.sleeps == [0.5, 1.0, 2.0]  # base 0.5 s doubling, at the top of the jitter
    assert caught.value.detail == "queue full"


def test_success_after_failures_returns_the_answer(serve: Serve) -> None:
    fake = FakeTime()
    answers = iter([busy(), httpx.Response(429), httpx.Response(200, json=VERSION)])
    h = serve(lambda r: next(answers), fake)
    assert h.call("version", "churn", 1).version == 1
    assert len(h.seen) == 3


def test_backoff_is_capped_and_jittered() -> None:
    policy = RetryPolicy(retries=10)
    assert policy.backoff(10, lambda: 1.0) == 8.0
    assert policy.backoff(2, lambda: 0.25) == 0.5
    assert policy.backoff(0, lambda: 0.0) == 0.0


def test_retry_after_seconds_wins_over_a_shorter_backoff(serve: Serve) -> None:
    fake = FakeTime()
    answers = iter([busy({"Retry-After": "3"}), httpx.Response(200, json=VERSION)])
    h = serve(lambda r: next(answers), fake)
    h.call("version", "churn", 1)
    assert fake.sleeps == [3.0]


def test_retry_after_as_an_http_date(serve: Serve) -> None:
    now = datetime(2026, 11, 21, 22, 0, 0, tzinfo=UTC).timestamp()
    date = format_datetime(datetime.fromtimestamp(now + 4, UTC), usegmt=True)
    assert retry_after({"retry-after": date}, now) == pytest.approx(4.0)
    assert retry_after({"retry-after": "soon"}, now) is None
    fake = FakeTime()
    answers = iter(
        [httpx.Response(429, headers={"Retry-After": date}), httpx.Response(200, json=VERSION)]
    )
    h = serve(lambda r: next(answers), fake)
    h.client._wall = lambda: now
    h.call("version", "churn", 1)
    assert fake.sleeps == [pytest.approx(4.0)]


def test_a_wait_past_the_deadline_raises_at_once(serve: Serve) -> None:
    fake = FakeTime()
    h = serve(lambda r: busy({"Retry-After": "60"}), fake, timeout=10.0)
    with pytest.raises(ServiceUnavailableError):
        h.call("version", "churn", 1)
    assert len(h.seen) == 1
    assert fake.sleeps == []


def test_the_whole_call_stays_within_its_timeout(serve: Serve) -> None:
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

    h = serve(slow_busy, fake, timeout=10.0, retries=10)
    with pytest.raises(CalibrationError):
        h.call("version", "churn", 1)
    assert fake.now - start <= 10.0
    assert left[0] == 10.0
    assert all(a > b for a, b in itertools.pairwise(left))
    assert 1 < len(h.seen) < 11


def test_per_call_timeout_overrides_the_clients(serve: Serve) -> None:
    fake = FakeTime()
    h = serve(lambda r: busy({"Retry-After": "5"}), fake, timeout=100.0)
    with pytest.raises(ServiceUnavailableError):
        h.call("version", "churn", 1, timeout=4.0)
    assert len(h.seen) == 1
    assert h.seen[0].extensions["timeout"]["connect"] == 4.0


@pytest.mark.parametrize("status", [400, 401, 404, 409, 422, 500])
def test_other_errors_are_not_retried(serve: Serve, status: int) -> None:
    fake = FakeTime()
    h = serve(lambda r: httpx.Response(status, json={"status": status}), fake)
    with pytest.raises(CalibrationError) as caught:
        h.call("version", "churn", 1)
    assert len(h.seen) == 1
    assert caught.value.status == status


def test_connection_errors_are_retried_then_raised(serve: Serve) -> None:
    fake = FakeTime()

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    h = serve(refuse, fake, retries=2)
    with pytest.raises(APIConnectionError) as caught:
        h.call("versions", "churn")
    assert len(h.seen) == 3
    assert caught.value.status is None
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_a_read_timeout_is_an_api_timeout_error(serve: Serve) -> None:
    fake = FakeTime()

    def stall(request: httpx.Request) -> httpx.Response:
        fake.now += 5.0  # the attempt used all the time it had
        raise httpx.ReadTimeout("slow", request=request)

    h = serve(stall, fake, timeout=5.0)
    with pytest.raises(APITimeoutError):
        h.call("version", "churn", 1)
    assert len(h.seen) == 1


def test_a_fit_always_carries_one_key_across_its_attempts(serve: Serve) -> None:
    fake = FakeTime()
    answers = iter([busy(), busy(), httpx.Response(201, json=VERSION)])
    h = serve(lambda r: next(answers), fake)
    h.call("fit", "churn", [0.1, 0.2, 0.7, 0.9], [0, 0, 1, 1])
    keys = {request.headers["Idempotency-Key"] for request in h.seen}
    assert len(h.seen) == 3
    assert len(keys) == 1
    assert next(iter(keys)).startswith("fit-")
    assert len({r.content for r in h.seen}) == 1  # the same bytes each time


def test_a_fit_read_timeout_is_retried_under_its_key(serve: Serve) -> None:
    fake = FakeTime()
    lost = iter([True, False])

    def flaky(request: httpx.Request) -> httpx.Response:
        if next(lost):  # processed, maybe, but the answer never came
            raise httpx.ReadTimeout("lost", request=request)
        return httpx.Response(200, json=VERSION)

    h = serve(flaky, fake)
    version = h.call("fit", "churn", [0.1, 0.9], [0, 1], idempotency_key="weekly-2026-47")
    assert version.version == 1
    assert [r.headers["Idempotency-Key"] for r in h.seen] == ["weekly-2026-47"] * 2


def test_two_fits_get_two_keys(serve: Serve) -> None:
    fake = FakeTime()
    h = serve(lambda r: httpx.Response(201, json=VERSION), fake)
    h.call("fit", "churn", [0.1, 0.9], [0, 1])
    h.call("fit", "churn", [0.1, 0.9], [0, 1])
    assert h.seen[0].headers["Idempotency-Key"] != h.seen[1].headers["Idempotency-Key"]


@pytest.mark.parametrize("key", ["", "x" * 129, "tab\there", "é"])
def test_a_bad_idempotency_key_is_refused_before_sending(serve: Serve, key: str) -> None:
    fake = FakeTime()
    h = serve(lambda r: httpx.Response(201, json=VERSION), fake)
    with pytest.raises(ValueError, match="idempotency_key"):
        h.call("fit", "churn", [0.1, 0.9], [0, 1], idempotency_key=key)
    assert h.seen == []


@pytest.mark.parametrize(
    ("status", "kind"), [(404, NotFoundError), (422, UnprocessableError), (429, RateLimitError)]
)
def test_errors_of_other_families_map_to_their_classes(
    serve: Serve, status: int, kind: type[CalibrationError]
) -> None:
    h = serve(lambda r: httpx.Response(status), FakeTime(), retries=0)
    with pytest.raises(kind):
        h.call("version", "churn", 1)


def test_headers_key_and_user_agent(serve: Serve) -> None:
    fake = FakeTime()
    h = serve(lambda r: httpx.Response(200, json=VERSION), fake)
    h.client.api_key = "secret"
    h.call("version", "churn", "production")
    assert h.seen[0].headers["Authorization"] == "Bearer secret"
    assert h.seen[0].headers["User-Agent"].startswith("calibration-client/")
    assert h.seen[0].url.path == "/v1/calibrators/churn/versions/production"


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_client_closes_only_its_own_http_client(kind: str) -> None:
    if kind == "sync":
        http = httpx.Client()
        with Client(http_client=http):
            pass
        assert not http.is_closed
        with Client() as own:
            pass
        assert own._http.is_closed
        http.close()
        return

    async def scoped() -> None:
        http = httpx.AsyncClient()
        async with AsyncClient(http_client=http):
            pass
        assert not http.is_closed
        async with AsyncClient() as own:
            pass
        assert own._http.is_closed
        await http.aclose()

    asyncio.run(scoped())
