"""Answers and bodies against a fake server, on a :class:`Client` and an :class:`AsyncClient`:
successful answers that cannot be read, 4xx statuses without a class, the deadline from
before encoding to the last byte, streamed and watched uploads, and fit bodies that are the
same bytes whatever is installed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from calibration_client import (
    APIResponseValidationError,
    APITimeoutError,
    AsyncClient,
    CalibrationError,
    Client,
    ClientError,
    ServiceUnavailableError,
    _arrays,
    _batches,
)
from client_fakes import URL, VERSION, FakeTime, Serve, busy

INFER_HEADER = json.dumps(
    {
        "model_name": "churn",
        "model_version": "1",
        "outputs": [
            {
                "name": "probabilities",
                "datatype": "FP64",
                "shape": [2],
                "parameters": {"binary_data_size": 16},
            }
        ],
    }
).encode()


def infer_answer(header_length: int) -> httpx.Response:
    body = INFER_HEADER + np.array([0.25, 0.75]).tobytes()
    return httpx.Response(
        200, content=body, headers={"Inference-Header-Content-Length": str(header_length)}
    )


Answer = Callable[[], httpx.Response]


@pytest.mark.parametrize(
    ("answer", "method", "args"),
    [
        (lambda: httpx.Response(200, text="<html>proxy</html>"), "version", ("churn", 1)),
        (lambda: httpx.Response(200, json={"name": "churn"}), "version", ("churn", 1)),
        (lambda: httpx.Response(200, json=[1, 2]), "versions", ("churn",)),
        (lambda: httpx.Response(200, json={"versions": []}), "versions", ("churn",)),
        (lambda: infer_answer(len(INFER_HEADER) + 100), "predict", ("churn", [0.1, 0.9])),
        (lambda: infer_answer(len(INFER_HEADER) - 3), "predict", ("churn", [0.1, 0.9])),
        (lambda: httpx.Response(200, content=b"GIF89a"), "diagnostics_png", ("churn",)),
    ],
)
def test_an_unreadable_success_is_a_calibration_error_not_retried(
    serve: Serve, answer: Answer, method: str, args: tuple[Any, ...]
) -> None:
    h = serve(lambda r: answer(), FakeTime())
    transport = {"transport": "binary"} if method == "predict" else {}
    with pytest.raises(APIResponseValidationError) as caught:
        h.call(method, *args, **transport)
    assert caught.value.status == 200
    assert len(h.seen) == 1
    assert isinstance(caught.value.__cause__, KeyError | ValueError | TypeError | IndexError)


def test_a_readable_binary_answer(serve: Serve) -> None:
    h = serve(lambda r: infer_answer(len(INFER_HEADER)), FakeTime())
    prediction = h.call("predict", "churn", [0.1, 0.9], transport="binary")
    assert prediction.probabilities.tolist() == [0.25, 0.75]


@pytest.mark.parametrize("status", [405, 408, 410, 415])
def test_a_4xx_without_a_class_is_a_client_error(serve: Serve, status: int) -> None:
    h = serve(lambda r: httpx.Response(status), FakeTime())
    with pytest.raises(ClientError) as caught:
        h.call("version", "churn", 1)
    assert type(caught.value) is ClientError
    assert caught.value.status == status
    assert len(h.seen) == 1


def test_retries_set_after_the_client_was_made_take_effect(serve: Serve) -> None:
    h = serve(lambda r: busy(), FakeTime(), retries=3)
    h.client.retries = 1
    with pytest.raises(ServiceUnavailableError):
        h.call("version", "churn", 1)
    assert len(h.seen) == 2


def test_the_deadline_starts_before_the_body_is_encoded(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeTime()
    as_scores = _arrays.as_scores

    def slow_encoding(values: Any, name: str = "scores") -> Any:
        fake.now += 3.0  # a big batch takes its time to check and encode
        return as_scores(values, name)

    monkeypatch.setattr(_arrays, "as_scores", slow_encoding)
    h = serve(lambda r: httpx.Response(201, json=VERSION), fake, timeout=10.0)
    h.call("fit", "churn", [0.1, 0.9], [0, 1])
    assert h.seen[0].extensions["timeout"]["read"] == pytest.approx(7.0)


def test_a_trickling_answer_cannot_stretch_a_sync_call() -> None:
    """httpx's read timeout restarts at every byte; the client's deadline does not."""
    fake = FakeTime()
    sent: list[int] = []

    def trickle() -> Iterator[bytes]:
        for i in range(100):
            fake.now += 1.0  # a byte a second: never a read timeout
            sent.append(i)
            yield b" "

    http = httpx.Client(
        transport=httpx.MockTransport(lambda r: httpx.Response(200, content=trickle()))
    )
    client = Client(URL, timeout=5.0, http_client=http)
    client._clock = fake.clock
    with pytest.raises(APITimeoutError):
        client.version("churn", 1)
    assert len(sent) == 5


def test_a_trickling_answer_cannot_stretch_an_async_attempt() -> None:
    async def stall(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(30)
        return httpx.Response(200, json=VERSION)

    async def call() -> float:
        http = httpx.AsyncClient(transport=httpx.MockTransport(stall))
        async with AsyncClient(URL, timeout=0.2, http_client=http) as client:
            start = asyncio.get_running_loop().time()
            with pytest.raises(APITimeoutError):
                await client.version("churn", 1)
            await http.aclose()
            return asyncio.get_running_loop().time() - start

    assert asyncio.run(call()) < 2.0


def test_predict_reports_its_upload_progress(serve: Serve) -> None:
    h = serve(lambda r: httpx.Response(200, json=infer_json()), FakeTime())
    h.client.bulk_rows = 10
    seen: list[tuple[int, int]] = []
    scores = np.linspace(-3, 3, 100_000)  # 800 kB of tensor: several chunks
    h.call("predict", "churn", scores, progress=lambda sent, total: seen.append((sent, total)))
    total = len(h.seen[0].content)
    assert seen[0] == (0, total)
    assert seen[-1] == (total, total)
    assert len(seen) > 3
    assert h.seen[0].headers["Content-Length"] == str(total)


def infer_json() -> dict[str, Any]:
    return {
        "model_name": "churn",
        "model_version": "1",
        "outputs": [{"name": "probabilities", "datatype": "FP64", "shape": [1], "data": [0.5]}],
    }


def test_fit_file_streams_the_same_bytes_on_every_attempt(serve: Serve, tmp_path: Path) -> None:
    path = tmp_path / "batch.csv"
    path.write_bytes(b"score,label\n" + b"0.25,1\n0.5,0\n" * 50_000)
    answers = iter([busy(), httpx.Response(201, json=VERSION)])
    h = serve(lambda r: next(answers), FakeTime())
    seen: list[tuple[int, int]] = []
    version = h.call(
        "fit_file",
        "churn",
        path,
        method="platt",
        tags={"team": "risk"},
        progress=lambda sent, total: seen.append((sent, total)),
    )
    assert version.version == 1
    assert [r.content for r in h.seen] == [path.read_bytes()] * 2
    assert len({r.headers["Idempotency-Key"] for r in h.seen}) == 1
    request = h.seen[0]
    assert request.headers["Content-Type"] == "text/csv"
    assert request.headers["Content-Length"] == str(path.stat().st_size)
    assert dict(request.url.params) == {"method": "platt", "tags": '{"team": "risk"}'}
    assert [s for s, _ in seen].count(0) == 2  # each attempt's bar starts again
    assert seen[-1] == (path.stat().st_size,) * 2


def test_fit_file_parquet_is_told_by_its_content(serve: Serve, tmp_path: Path) -> None:
    path = tmp_path / "batch.data"
    path.write_bytes(b"PAR1 and the rest")
    h = serve(lambda r: httpx.Response(201, json=VERSION), FakeTime())
    h.call("fit_file", "churn", path)
    assert h.seen[0].headers["Content-Type"] == "application/vnd.apache.parquet"
    assert "method" not in h.seen[0].url.params
    with pytest.raises(FileNotFoundError):
        h.call("fit_file", "churn", tmp_path / "missing.csv")


def test_a_fits_json_is_the_same_bytes_with_or_without_orjson(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    scores = np.array([0.1, 1 / 3, 1e22, 5e-324])
    h = serve(lambda r: httpx.Response(201, json=VERSION), FakeTime())
    h.call("fit", "churn", scores, [0, 1, 1, 0], params={"trim": 1e-6}, idempotency_key="k")
    monkeypatch.setattr(_batches, "_orjson", None)
    h.call("fit", "churn", scores, [0, 1, 1, 0], params={"trim": 1e-6}, idempotency_key="k")
    assert h.seen[0].content == h.seen[1].content
    expected = {"scores": scores.tolist(), "labels": [0, 1, 1, 0], "method": "auto"}
    expected["params"] = {"trim": 1e-6}
    assert h.seen[0].content == json.dumps(expected, separators=(",", ":")).encode()


def test_diagnostics_png_returns_the_picture(serve: Serve) -> None:
    png = b"\x89PNG\r\n\x1a\n" + b"rest"
    h = serve(lambda r: httpx.Response(200, content=png), FakeTime())
    assert h.call("diagnostics_png", "churn", "production", n_bins=5) == png
    assert h.seen[0].url.path == "/v1/calibrators/churn/versions/production/diagnostics.png"
    assert dict(h.seen[0].url.params) == {"n_bins": "5"}


def test_every_error_is_a_calibration_error() -> None:
    assert issubclass(APIResponseValidationError, CalibrationError)
    assert issubclass(ClientError, CalibrationError)


def _negative_size() -> httpx.Response:
    header = INFER_HEADER.replace(b'"binary_data_size": 16', b'"binary_data_size": -16')
    body = header + np.array([0.25, 0.75]).tobytes()
    return httpx.Response(
        200, content=body, headers={"Inference-Header-Content-Length": str(len(header))}
    )


def _bad_gzip() -> httpx.Response:
    return httpx.Response(200, content=b"not gzip", headers={"Content-Encoding": "gzip"})


@pytest.mark.parametrize(
    ("answer", "method", "args"),
    [(_negative_size, "predict", ("churn", [0.1, 0.9])), (_bad_gzip, "version", ("churn", 1))],
)
def test_lying_sizes_and_encodings_are_unreadable_answers(
    serve: Serve, answer: Answer, method: str, args: tuple[Any, ...]
) -> None:
    h = serve(lambda r: answer(), FakeTime())
    transport = {"transport": "binary"} if method == "predict" else {}
    with pytest.raises(APIResponseValidationError):
        h.call(method, *args, **transport)
    assert len(h.seen) == 1


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"base_url": "http://[::1"}, "base_url"),
        ({"base_url": "ftp://example.org"}, "base_url"),
        ({"api_key": "abc\n"}, "api_key"),
        ({"api_key": "cl\u00e9"}, "api_key"),
        ({"timeout": float("inf")}, "timeout"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_arguments_that_cannot_make_a_request_are_value_errors(
    options: dict[str, Any], field: str
) -> None:
    for kind in (Client, AsyncClient):
        with pytest.raises(ValueError, match=field):
            kind(**{"base_url": URL, **options})


def test_a_key_or_name_that_cannot_be_sent_is_a_value_error(serve: Serve) -> None:
    h = serve(lambda r: httpx.Response(500), FakeTime())
    with pytest.raises(ValueError, match=r"Idempotency-Key|idempotency_key"):
        h.call("fit", "churn", [0.1, 0.9], [0, 1], idempotency_key="abc\n")
    with pytest.raises(ValueError, match="name"):
        h.call("version", None, 1)
    assert h.seen == []
