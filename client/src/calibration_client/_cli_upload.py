"""The command line's requests outside :class:`~calibration_client.Client`: a file streamed
to the service as it is (with a progress bar), and answers that are not JSON (pictures)."""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import httpx

from calibration_client._errors import CalibrationError, connection_error, error_from_response
from calibration_client._retry import RetryPolicy

PROGRESS_BYTES = 4 * 1024 * 1024
"""Uploads larger than this show a progress bar when stderr is a terminal."""
CHUNK_BYTES = 256 * 1024
REQUEST_SECONDS = 300.0
"""How long a request may take, its retries included (a big upload is slow)."""


def send(
    url: str,
    key: str | None,
    method: str,
    path: str,
    body: Callable[[], Iterator[bytes]] | None = None,
    **kwargs: Any,
) -> httpx.Response:
    """A request outside :class:`Client` (a streamed upload, a picture), retried as the
    client retries (connection failures, 429 and 503, within one deadline): the answer, or
    the :class:`CalibrationError` it stands for. ``body`` makes each attempt's content.
    """
    headers = {**kwargs.pop("headers", {}), **({"Authorization": f"Bearer {key}"} if key else {})}
    policy, deadline = RetryPolicy(), time.monotonic() + REQUEST_SECONDS
    with httpx.Client(timeout=REQUEST_SECONDS) as http:
        for attempt in itertools.count():
            content = None if body is None else body()
            try:
                response = http.request(
                    method, url + path, headers=headers, content=content, **kwargs
                )
            except httpx.TransportError as failure:
                error: CalibrationError = connection_error(failure)
                error.__cause__ = failure  # what the policy judges a failure by
            else:
                if response.is_success:
                    return response
                error = error_from_response(response)
            wait = policy.wait(error, attempt, deadline - time.monotonic(), random.random)
            if wait is None:
                raise error
            time.sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover


def file_chunks(path: Path, progress: Progress | None) -> Iterator[bytes]:
    """The file's bytes as they are, a chunk at a time, counted by ``progress``."""
    with path.open("rb") as stream:
        while chunk := stream.read(CHUNK_BYTES):
            if progress is not None:
                progress.advance(len(chunk))
            yield chunk
    if progress is not None:
        progress.finish()


class Progress:
    """A one-line bar redrawn in place on ``stream``: ``[#####-----]  50%  2.0/4.0 MB``."""

    WIDTH = 30

    def __init__(self, total: int, stream: IO[str]) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.shown = -1
        self.stream = stream

    def advance(self, sent: int) -> None:
        self.done = min(self.done + sent, self.total)
        percent = 100 * self.done // self.total
        if percent != self.shown:
            self.shown = percent
            filled = self.WIDTH * self.done // self.total
            bar = "#" * filled + "-" * (self.WIDTH - filled)
            megabytes = f"{self.done / 1e6:.1f}/{self.total / 1e6:.1f} MB"
            self.stream.write(f"\r[{bar}] {percent:3d}%  {megabytes}")
            self.stream.flush()

    def finish(self) -> None:
        self.advance(0)
        self.stream.write("\n")
        self.stream.flush()
