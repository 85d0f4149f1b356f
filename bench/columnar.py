"""A fit posted as a Parquet file against the same fit posted as JSON (issue 12): the wall time
of the request and the peak resident memory of the service, each measured on a fresh server.

The method is ``isotonic`` on distinct float scores (the margins of :func:`bench.fits.batch`):
the cheapest fit on such scores (its five folds and final fit share one sort), so that what
the two requests do differently (reading the body) is not buried under the fit they share.
The scores are float64 as a model writes them: in JSON some 19 characters each. Both bodies
are built before the clock starts; the time is the client's, upload to answer, after one
unmeasured fit of :data:`WARM_UP` pairs in the same media type (a long-running service has
paid its first-use costs: pyarrow's, the JSON worker process's start). The memory is
``VmHWM`` from ``/proc/PID/status``: of the server process alone, and of the server plus its
children (a big JSON body is parsed in a worker process, :mod:`app.api.bodies.json_process`, started
on first use through a forkserver; a Parquet body starts none), whose summed peaks bound
their joint peak from above. Each measurement has a server of its own, so that the peaks do
not mix, and is made once (a 10^7-pair fit takes seconds and gigabytes). The smoke run
(``python -m bench --quick``) makes both on one server instead, its peaks reset before each
measured fit (:func:`~bench.watch.reset_peaks`): at its 10^3 pairs a server's start (its
imports, its workers' fork server: some 10 CPU seconds, measured) is nearly all the rows'
cost, and the run only checks that the rows come out.

``python -m bench.columnar [N]`` prints the rows for N pairs (default 10^7).
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from dataclasses import dataclass

import httpx
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from bench.fits import batch
from bench.http import migrated_env, serve_process
from bench.table import Row, Target, markdown, progress, size_label
from bench.watch import descendants, peak_kb, reset_peaks

LOWER = Target(1.0)
"""Issue 12: a 10^7-row Parquet fit takes less time, and less memory, than the same as JSON."""
METHOD = "isotonic"
PARQUET = "application/vnd.apache.parquet"
WARM_UP = 10**5
"""Pairs of the unmeasured first fit (its JSON body, over 1 MiB, starts the JSON worker)."""
TIMEOUT_SECONDS = 900.0
"""The longest a fit may take (a 10^7-pair JSON fit takes about ten seconds here)."""


@dataclass(frozen=True)
class Measure:
    """One fit's wall time (s) and peak RSS (kB) of the server, alone and with its children."""

    seconds: float
    server_kb: int
    tree_kb: int


def bodies(n: int) -> dict[str, tuple[str, bytes]]:
    """The same n pairs as a Parquet file and as a JSON body: (media type, bytes) by name."""
    f, y, _ = batch(n, tied=False, seed=8)
    labels = y.astype(np.int8)
    as_json = orjson.dumps({"scores": f, "labels": labels}, option=orjson.OPT_SERIALIZE_NUMPY)
    return {"parquet": (PARQUET, parquet(f, labels)), "json": ("application/json", as_json)}


def parquet(scores: np.ndarray, labels: np.ndarray) -> bytes:
    """A Parquet file of the columns ``score`` and ``label`` (as labels' dtype)."""
    sink = io.BytesIO()
    pq.write_table(pa.table({"score": scores, "label": labels}), sink)
    return sink.getvalue()


def columnar_rows(n: int, one_server: bool = False) -> list[Row]:
    """Wall time and peak RSS of an n-pair isotonic fit sent as Parquet, against the same
    pairs sent as JSON; the targets (lower, both) apply from 10^7 pairs. Each fit on a fresh
    server, or both on one with ``one_server`` (the smoke run's: see the module's docstring)."""
    sent, warm = bodies(n), bodies(min(n, WARM_UP))
    largest = max(len(body) for _, body in sent.values())
    measured: dict[str, Measure] = {}
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **migrated_env(tmp),
            "CALIBRATION_MAX_BODY_BYTES": str(largest + 2**20),
            "CALIBRATION_MAX_BATCH_ROWS": str(n),
            "CALIBRATION_FIT_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
        }
        if one_server:
            progress(f"columnar: {size_label(n)}-pair {METHOD} fits, both on one server")
            measured = _fits_on_one_server(env, sent, warm)
        else:
            for name, (media_type, body) in sent.items():
                progress(f"columnar: {size_label(n)}-pair {METHOD} fit as {name}, fresh server")
                measured[name] = _fit_once(env, name, media_type, body, warm[name][1])
    parquet, as_json = measured["parquet"], measured["json"]
    size = size_label(n)
    target = LOWER if n >= 10**7 else None
    gb = 1024**2
    return [
        Row(
            "columnar",
            f"{METHOD} fit wall time, Parquet / JSON",
            size,
            1e3 * parquet.seconds,
            1e3 * as_json.seconds,
            "ms",
            target,
        ),
        Row(
            "columnar",
            "server peak RSS, Parquet / JSON",
            size,
            parquet.server_kb / gb,
            as_json.server_kb / gb,
            "GB",
            target,
        ),
        Row(
            "columnar",
            "server + children peak RSS, Parquet / JSON",
            size,
            parquet.tree_kb / gb,
            as_json.tree_kb / gb,
            "GB",
            target,
        ),
    ]


def _fit_once(
    env: dict[str, str], name: str, media_type: str, body: bytes, warm_up: bytes
) -> Measure:
    """One fit on a server of its own, after the ``warm_up`` one: the request's wall time and
    the peaks after it."""
    with (
        serve_process("app.main:app", env) as (url, process),
        httpx.Client(base_url=url, timeout=TIMEOUT_SECONDS) as client,
    ):
        _fit(client, name, media_type, warm_up)
        return _measured_fit(client, process.pid, name, media_type, body)


def _fits_on_one_server(
    env: dict[str, str],
    sent: dict[str, tuple[str, bytes]],
    warm: dict[str, tuple[str, bytes]],
) -> dict[str, Measure]:
    """Every fit of ``sent`` on one server, after every warm-up, each measured as
    :func:`_fit_once` measures it but from peaks reset just before it."""
    with (
        serve_process("app.main:app", env) as (url, process),
        httpx.Client(base_url=url, timeout=TIMEOUT_SECONDS) as client,
    ):
        for name, (media_type, warm_up) in warm.items():
            _fit(client, name, media_type, warm_up)
        measured = {}
        for name, (media_type, body) in sent.items():
            reset_peaks(process.pid)
            measured[name] = _measured_fit(client, process.pid, name, media_type, body)
        return measured


def _measured_fit(
    client: httpx.Client, pid: int, name: str, media_type: str, body: bytes
) -> Measure:
    """One fit's wall time, and the peaks of the server ``pid`` and of its tree after it."""
    start = time.perf_counter()
    _fit(client, name, media_type, body)
    seconds = time.perf_counter() - start
    server_kb = peak_kb(pid)
    children_kb = sum(peak_kb(child) for child in descendants(pid))
    return Measure(seconds, server_kb, server_kb + children_kb)


def _fit(client: httpx.Client, name: str, media_type: str, content: bytes) -> None:
    """Fit the calibrator ``name`` on ``content``, sent as ``media_type``."""
    answer = client.post(
        f"/v1/calibrators/{name}/fit?method={METHOD}",
        content=content,
        headers={"content-type": media_type},
    )
    answer.raise_for_status()


def main() -> None:
    """Print the rows for ``sys.argv[1]`` pairs (default 10^7)."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10**7
    print(markdown(columnar_rows(n)))


if __name__ == "__main__":
    main()
