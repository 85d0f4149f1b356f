"""``/healthz`` keeps answering while the heaviest requests run, over real sockets.

One ``python -m app.serve`` (SQLite, one worker) receives at once a fit of ten million CSV
rows and two bodies of 64 MiB + 1 byte, one declared by its Content-Length (refused from its
headers) and one chunked (refused once 64 MiB have been read), while ``GET /healthz`` is polled
every 20 ms on a connection of its own. Parsing used to hold the GIL for whole seconds at this
size (one ``np.loadtxt`` over the body): polls waited 1 to 2 s.

Every poll must answer within :data:`POLL_SECONDS`, the issue's target. Served by uvicorn's
h11 protocol the worst poll was 105 to 191 ms; served by httptools (:mod:`app.server.protocol`)
38 to 51 ms, until polls of 100 to 250 ms came back in about half the runs. A watchdog that
dumps every thread's stack when a thread has not run for 40 ms found two causes. sqlite3
bound the 160 MB stored batch whole, holding the GIL for about 60 ms (now written through its
blob I/O: :meth:`app.store.blobs.BlobOperations.add_blobs`). And the fit's 80 MB arrays,
returned to the kernel and faulted in again by the hundred, froze the whole machine (both
processes at once, the watchdog's own C thread included) now and then: processes that run
fits keep freed memory (:data:`app.service.workers.ALLOCATOR_TUNABLES`). About one run in
twelve still had one poll of 100 to 170 ms while the server's heap grew for the first time,
until the fit itself moved to a worker process (issue 25): the server now only reads the
bodies. One poll still took 104 to 133 ms now and then (in CI too), as the third request
started: the test's own sender threads held its GIL as they started (the polls now come from
a process of their own, :mod:`tests.server.polling`), and the server joined the 64 MiB it
had read on its event loop (~70 ms; now in a thread, :func:`app.api.deps.read_body`). Worst
polls since: 28 to 57 ms in 50 runs in a row. In CI one poll took 150 ms 0.3 s after the fit
had answered, while the server had nothing to do; it never happened here, with the other core
busy or not. A process of the test's that only sleeps a millisecond at a time now notes every
stall of the whole machine (:mod:`tests.server.polling`), and a poll is judged on its time
less any such stall within it. The figures are printed (``pytest -s``). Everything is
bounded: the test takes ~35 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from tests.api.helpers import as_csv, assert_problem, sigmoid_batch
from tests.server.polling import Poller
from tests.servers import Service

pytestmark = pytest.mark.serial  # every /healthz is timed against 100 ms

ROWS = 10_000_000
MAX_BODY = 64 * 1024 * 1024
"""The default body limit: the ten million rows below fit in it."""

POLL_SECONDS = 0.100
"""The issue's target for every ``/healthz`` under load (before the fix: 1 to 2 s)."""

EXCUSED_SECONDS = 0.5
"""The most time in all that polls may spend in stalls of the machine (seen in CI: 0.15 s)."""

REQUEST_SECONDS = 45.0
"""The longest the three requests may take together."""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Service]:
    service = Service(
        f"sqlite:///{tmp_path / 'calibration.db'}",
        tmp_path / "serve.log",
        1,
        CALIBRATION_MAX_BODY_BYTES=str(MAX_BODY),
        CALIBRATION_MAX_BATCH_ROWS=str(ROWS),
        CALIBRATION_FIT_TIMEOUT_SECONDS=str(REQUEST_SECONDS),
    )
    try:
        yield service  # started: the test makes its rows meanwhile, then waits for it
    finally:
        service.stop()


def ten_million_rows() -> bytes:
    """``score,label`` rows with scores 0..99 and P(label = 1 | s) = 1 / (1 + exp(-(s-50)/10)):
    Platt's A = -0.1, B = 5. At most five bytes a row, so that the body stays within 64 MiB.
    Each row is picked from the 200 possible lines, held NUL-padded to five bytes, and the NULs
    dropped: less than half the time of joining ten million bytes objects."""
    rng = np.random.default_rng(10)
    scores = rng.integers(0, 100, ROWS)
    labels = rng.random(ROWS) < 1.0 / (1.0 + np.exp(-(scores - 50) / 10))
    lines = np.zeros((200, 5), dtype=np.uint8)
    for i in range(200):
        line = f"{i // 2},{i % 2}\n".encode()
        lines[i, : len(line)] = np.frombuffer(line, dtype=np.uint8)
    padded = lines[scores * 2 + labels].ravel()
    body = b"score,label\n" + padded[padded != 0].tobytes()
    assert len(body) < MAX_BODY
    return body


PIECE = bytes(2**20)


def too_large() -> Iterator[bytes]:
    """:data:`MAX_BODY` + 1 zero bytes, a MiB at a time from one buffer: the test's own process
    stays small (it used to hold two 64 MiB copies), so that what is measured is the server."""
    for _ in range(MAX_BODY // len(PIECE)):
        yield PIECE
    yield b"\0"


def in_thread(
    results: dict[str, object], name: str, send: Callable[[], httpx.Response]
) -> threading.Thread:
    """``send()`` in a thread of its own: its answer (or exception) and when it ran go to
    ``results``."""

    def run() -> None:
        started = time.monotonic()
        try:
            results[name] = send()
        except Exception as exc:  # reported by the assertions, not lost in the thread
            results[name] = exc
        results[f"{name} seconds"] = (started, time.monotonic())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_healthz_answers_while_ten_million_rows_are_fitted_and_64_mib_bodies_refused(
    served: Service,
) -> None:
    rows = ten_million_rows()  # while the server starts, on the other core
    served.wait_until_ready(timeout=20)
    # Warm up: the first fit imports the numerics, and the objects made at start-up meet
    # their first full garbage collection; neither is what is measured here. It also waits
    # for the workers' fork server to start (seconds, more on a busy machine): 60 s at most.
    warm = served.client.post(
        "/v1/calibrators/warm/fit?method=platt",
        content=as_csv(sigmoid_batch(2000)),
        headers={"content-type": "text/csv"},
        timeout=60,
    )
    assert warm.status_code == 201, warm.text
    url = f"{served.base_url}/v1/calibrators/big/fit"
    csv = {"content-type": "text/csv"}

    def fit() -> httpx.Response:
        return httpx.post(f"{url}?method=platt", content=rows, headers=csv, timeout=REQUEST_SECONDS)

    def declared() -> httpx.Response:
        length = {"content-length": str(MAX_BODY + 1)}  # httpx then sends it unchunked
        return httpx.post(
            url, content=too_large(), headers={**csv, **length}, timeout=REQUEST_SECONDS
        )

    def chunked() -> httpx.Response:
        return httpx.post(url, content=too_large(), headers=csv, timeout=REQUEST_SECONDS)

    results: dict[str, object] = {}
    with Poller(served.base_url) as poller:
        time.sleep(0.3)
        threads = []
        for name, send in (("fit", fit), ("chunked", chunked), ("declared", declared)):
            threads.append(in_thread(results, name, send))
            time.sleep(0.2)  # the refused bodies arrive while the rows are being parsed
        deadline = time.monotonic() + REQUEST_SECONDS
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        time.sleep(0.3)

    report(poller, results)
    fitted = results.get("fit", f"no answer within {REQUEST_SECONDS:g} s")
    assert isinstance(fitted, httpx.Response), fitted
    assert fitted.status_code == 201, fitted.text
    version = fitted.json()
    assert version["n_samples"] == ROWS
    assert abs(version["fitted"]["A"] + 0.1) < 0.005
    assert abs(version["fitted"]["B"] - 5.0) < 0.1
    for name in ("chunked", "declared"):
        refused = results.get(name, f"no answer within {REQUEST_SECONDS:g} s")
        assert isinstance(refused, httpx.Response), (name, refused)
        assert_problem(refused, 413, "limit")

    assert not poller.failures, poller.failures
    assert len(poller.polls) > 100, "too few polls to judge"
    # What the server took: a poll's time, less any stall of the whole machine within it; a
    # machine that stalled for more than EXCUSED_SECONDS in all cannot judge the server
    stalled = [min(seconds, poller.stalled(started, seconds)) for started, seconds in poller.polls]
    assert sum(stalled) < EXCUSED_SECONDS, f"the machine stalled for {sum(stalled):.2f} s"
    worst = max(seconds - s for (_, seconds), s in zip(poller.polls, stalled, strict=True))
    assert worst < POLL_SECONDS, f"a /healthz took {worst * 1000:.0f} ms"


def report(poller: Poller, results: dict[str, object]) -> None:
    """The figures of the run: when each request ran, and every /healthz over 50 ms."""
    if not poller.polls:
        return
    origin = poller.polls[0][0]
    latencies = np.array([seconds for _, seconds in poller.polls]) * 1000
    print(
        f"\n{len(latencies)} polls of /healthz: median {np.median(latencies):.1f} ms, "
        f"p99 {np.percentile(latencies, 99):.1f} ms, worst {latencies.max():.1f} ms"
    )
    for name in ("fit", "chunked", "declared"):
        span = results.get(f"{name} seconds")
        if isinstance(span, tuple):
            answer = results.get(name)
            status = answer.status_code if isinstance(answer, httpx.Response) else answer
            print(f"  {name}: {span[0] - origin:.2f} s to {span[1] - origin:.2f} s, {status}")
    for started, seconds in poller.polls:
        if seconds > 0.050:
            stalled = poller.stalled(started, seconds)
            print(
                f"  /healthz at {started - origin:.2f} s took {seconds * 1000:.0f} ms"
                + (f", {stalled * 1000:.0f} ms of them a stall of the machine" if stalled else "")
            )
    for started, seconds in poller.stalls:
        print(f"  the machine stalled at {started - origin:.2f} s for {seconds * 1000:.0f} ms")
