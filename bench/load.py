"""The service under load, as ``make run`` serves it (issue 25): ``python -m app.serve`` with
one server process (``CALIBRATION_WORKERS=1``), its worker processes and default settings, on
a fresh SQLite file and on a throwaway PostgreSQL database, over loopback.

1. 64 concurrent 300-row Platt fits from 16 client threads, on one name and on 64 names:
   how many answer 201, and how many of the versions are as expected (1..64 on one name, v1
   on each of 64), answered and listed, less any version that should not exist; and the
   wall time of the 64 against 64 times one fit alone.
2. A 6·10^6-row isotonic version fitted from a Parquet body, then 8 concurrent
   ``GET …/versions/latest/diagnostics?n_bins=K``, K = 10..17: how many answer 200, the
   slowest against one such request alone (``n_bins=9``), and the peak resident memory of
   the whole service (server and every process below it, sampled every 50 ms) against it
   before.
3. 15 s idle after that: the serving process's resident memory and the whole service's.
4. ``/healthz`` every 100 ms while 1 and 2 run: the slowest and the 99th percentile,
   against the median of 20 at rest.
5. 10^6-pair fits as JSON and Parquet against scikit-learn (:mod:`bench.fits_over_http`).

PostgreSQL runs 1 and 4. ``--quick`` runs 1 and 4 on SQLite only, with 16 fits on one
name: a diagnostics request takes seconds even of a 10^4-row version on this shared machine,
a cluster seconds to start, the idle wait 15 s, and the smoke run is near its time limit
already, so it leaves out the fits on many names, 2, 3, 5 and PostgreSQL.
Every request has a timeout, so every loop is bounded in time.
"""

from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import orjson

from app.settings import Settings
from bench.columnar import PARQUET, parquet
from bench.fits import batch
from bench.fits_over_http import fits_over_http_rows
from bench.http import migrated_env, serve_module
from bench.postgres import cluster
from bench.table import Row, Target, markdown, progress, size_label
from bench.watch import Memory, Samples, descendants, memory_now, percentile, watching

CLIENTS = 16
FITS = 64
QUICK_FITS = 16
FIT_ROWS = 300
BIG_ROWS = 6 * 10**6
N_BINS = range(10, 18)
IDLE_SECONDS = 15.0
REST_PROBES = 20
FIT_TIMEOUT = 120.0
"""The longest a 300-row fit may take, queueing included."""
FIT_TIMEOUT_BIG = 900.0
"""The longest the large fit may take."""
DIAGNOSTICS_TIMEOUT = 300.0
"""The longest one diagnostics request may take (five times its target)."""
ALL = Target(1.0, at_least=True)
SLOWEST_S = Target(60.0)
PEAK_GB = Target(2.0)
SERVER_IDLE_GB = Target(0.4)
SERVICE_IDLE_GB = Target(1.0)
HEALTHZ_MS = Target(100.0)
GB = 1024**3


def load_rows(quick: bool) -> list[Row]:
    """Every load row; ``quick``: 16 fits on one name and ``/healthz``, on SQLite only."""
    with tempfile.TemporaryDirectory() as tmp:
        env = migrated_env(tmp)
        if quick:
            progress("load: --quick runs 16 fits on one name only: no diagnostics, no PostgreSQL")
            return _served("SQLite", env, QUICK_FITS, None, full=False, many_names=False)
        rows = _served("SQLite", env, FITS, BIG_ROWS, full=True)
    with cluster() as url:
        env = {**os.environ, "CALIBRATION_DATABASE_URL": url, "CALIBRATION_LOG_LEVEL": "warning"}
        rows += _served("PostgreSQL", env, FITS, None, full=False)
    return rows


def _served(
    backend: str,
    env: dict[str, str],
    fits: int,
    big: int | None,
    *,
    full: bool,
    many_names: bool = True,
) -> list[Row]:
    """The rows of one server on ``backend``: ``fits`` fits on one name (and on as many
    names, when ``many_names``), the ``big``-row version's diagnostics (None: none), and,
    when ``full``, the idle memory and the fits against scikit-learn."""
    body = parquet(*_pairs(big, 7)) if big else b""
    env = {**env, "CALIBRATION_WORKERS": "1"}
    if len(body) + 2**20 > Settings().max_body_bytes:
        env["CALIBRATION_MAX_BODY_BYTES"] = str(len(body) + 2**20)
    progress(f"load: python -m app.serve on {backend}, one server process")
    with (
        serve_module(env) as (url, process),
        httpx.Client(base_url=url, limits=httpx.Limits(max_connections=CLIENTS)) as client,
    ):
        at_rest = statistics.median(_healthz_ms(client) for _ in range(REST_PROBES))
        with watching(url, process.pid) as samples:
            start = time.monotonic()
            rows = _fits(client, backend, fits, one_name=True)
            if many_names:
                rows += _fits(client, backend, fits, one_name=False)
            if big:
                rows += _diagnostics(client, samples, process.pid, big, body)
            end = time.monotonic()
        during = [h.ms for h in samples.health_between(start, end)]
        failed = sum(not h.ok for h in samples.health_between(start, end))
        progress(f"load: {len(during)} /healthz during the load, {failed} failed or not 200")
        what = f"/healthz during the load ({backend})"
        rows += [
            Row(
                "load",
                f"{what}: slowest / median at rest",
                "1",
                max(during),
                at_rest,
                "ms",
                HEALTHZ_MS,
                absolute=True,
            ),
            Row(
                "load",
                f"{what}: p99 / median at rest",
                "1",
                percentile(during, 99),
                at_rest,
                "ms",
                HEALTHZ_MS,
                absolute=True,
            ),
        ]
        alive = process.poll() is None
        rows.append(
            Row(
                "load",
                f"server still running after the load ({backend})",
                "1",
                int(alive),
                1,
                "",
                ALL,
            )
        )
        if full and alive:
            rows += _idle(process.pid)
        if full and process.poll() is None:
            rows += fits_over_http_rows(client)
    return rows


def _pairs(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n distinct scores and their labels, as integers."""
    f, y, _ = batch(n, tied=False, seed=seed)
    return f, y.astype(np.int8)


def _healthz_ms(client: httpx.Client) -> float:
    start = time.perf_counter()
    client.get("/healthz", timeout=10).raise_for_status()
    return 1e3 * (time.perf_counter() - start)


def _fits(client: httpx.Client, backend: str, count: int, *, one_name: bool) -> list[Row]:
    """``count`` concurrent Platt fits from :data:`CLIENTS` threads, on one name or on as
    many names; the 201s, the versions as expected, and the wall time against one alone."""
    prefix = f"{backend.lower()}-{'one' if one_name else 'many'}"
    bodies = []
    for i in range(count):
        f, y = _pairs(FIT_ROWS, i)
        body = {"scores": f, "labels": y, "method": "platt"}
        bodies.append(orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY))
    names = [prefix if one_name else f"{prefix}-{i}" for i in range(count)]

    def fit(i: int, name: str | None = None) -> tuple[int, int | None, str]:
        try:
            answer = client.post(
                f"/v1/calibrators/{name or names[i]}/fit",
                content=bodies[i],
                headers={"content-type": "application/json"},
                timeout=FIT_TIMEOUT,
            )
        except httpx.HTTPError as exc:
            return 0, None, repr(exc)
        created = answer.status_code == 201
        return answer.status_code, answer.json()["version"] if created else None, answer.text

    alone = statistics.median(_seconds(lambda: fit(0, f"{prefix}-alone")) for _ in range(3))
    progress(f"load: {count} concurrent {FIT_ROWS}-row Platt fits on {prefix}")
    start = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as threads:
        answers = list(threads.map(fit, range(count)))
    wall = time.perf_counter() - start
    statuses = Counter(status for status, _, _ in answers)
    for status, _, text in answers:
        if status != 201:
            progress(f"load: a fit on {prefix} answered {status}: {text[:300]}")
    expected = {(name, i + 1 if one_name else 1) for i, name in enumerate(names)}
    answered = {(names[i], version) for i, (_, version, _) in enumerate(answers) if version}
    listed = {
        (name, v["version"])
        for name in set(names)
        for v in client.get(f"/v1/calibrators/{name}", params={"limit": 100})
        .json()
        .get("versions", [])
    }
    wrong = (answered | listed) - expected
    if wrong or statuses[201] != count:
        progress(f"load: {prefix}: statuses {dict(statuses)}, unexpected {sorted(wrong)[:10]}")
    where = f"{count} concurrent {FIT_ROWS}-row Platt fits, {CLIENTS} clients, " + (
        "one name" if one_name else f"{count} names"
    )
    ok = len(expected & answered & listed) - len(wrong)
    return [
        Row("load", f"{where} ({backend}): 201s / sent", str(count), statuses[201], count, "", ALL),
        Row(
            "load",
            f"{where} ({backend}): versions as expected / sent",
            str(count),
            ok,
            count,
            "",
            ALL,
        ),
        Row(
            "load",
            f"{where} ({backend}): wall time / {count} x one alone",
            str(count),
            wall,
            count * alone,
            "s",
        ),
    ]


def _seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _diagnostics(
    client: httpx.Client, samples: Samples, pid: int, n: int, body: bytes
) -> list[Row]:
    """Fit an isotonic version of n pairs from a Parquet ``body``, then its diagnostics:
    :data:`N_BINS` at once, then a whole report alone (the reference), then one for new bins
    alone."""
    size = size_label(n)
    progress(f"load: a {size}-row isotonic fit from a {len(body) / 2**20:.0f} MiB Parquet body")
    before = memory_now(pid)
    fitted = client.post(
        "/v1/calibrators/big/fit?method=isotonic",
        content=body,
        headers={"content-type": PARQUET},
        timeout=FIT_TIMEOUT_BIG,
    )
    after = memory_now(pid)
    if fitted.status_code != 201:
        progress(f"load: the {size}-row fit answered {fitted.status_code}: {fitted.text[:300]}")
        return [
            Row("load", f"fit of a {size}-row isotonic version: 201s / sent", size, 0, 1, "", ALL)
        ]
    fit_peak = max(m.service for m in [before, after, *samples.memory_between(before.at, after.at)])
    seconds = after.at - before.at
    progress(f"load: fitted in {seconds:.1f} s, service peak {fit_peak / GB:.2f} GB")

    def diagnostics(bins: int, resamples: int = 1000) -> tuple[int, float, str]:
        start = time.perf_counter()
        try:
            answer = client.get(
                "/v1/calibrators/big/versions/latest/diagnostics",
                params={"n_bins": bins, "bootstrap": resamples},
                timeout=DIAGNOSTICS_TIMEOUT,
            )
        except httpx.HTTPError as exc:
            return 0, time.perf_counter() - start, repr(exc)
        return answer.status_code, time.perf_counter() - start, answer.text[:300]

    progress(f"load: {len(N_BINS)} concurrent diagnostics, n_bins {N_BINS[0]}..{N_BINS[-1]}")
    begun = memory_now(pid)
    with ThreadPoolExecutor(len(N_BINS)) as threads:
        answers = list(threads.map(diagnostics, N_BINS))
    ended = memory_now(pid)
    sampled = [begun, ended, *samples.memory_between(begun.at, ended.at)]
    peak = Memory(
        ended.at,
        max(m.server for m in sampled),
        max(m.service for m in sampled),
    )
    for bins, (status, seconds, text) in zip(N_BINS, answers, strict=True):
        progress(
            f"load: n_bins={bins}: {status} in {seconds:.1f} s"
            + ("" if status == 200 else f": {text}")
        )
    # one whole report alone (other resamples: nothing of the eight's serves it), then one
    # for bins not asked yet, which bins the stored out-of-fold predictions only
    whole_status, alone, text = diagnostics(N_BINS[0], 999)
    failed = "" if whole_status == 200 else f": {text[:200]}"
    progress(f"load: one whole report alone: {whole_status} in {alone:.1f} s{failed}")
    binned_status, binned, _ = diagnostics(N_BINS[0] - 1)
    progress(f"load: n_bins={N_BINS[0] - 1} after them: {binned_status} in {binned:.1f} s")
    answered = whole_status == binned_status == 200
    ok = sum(status == 200 for status, _, _ in answers)
    slowest = max(seconds for _, seconds, _ in answers)
    what = f"{len(N_BINS)} concurrent diagnostics of a {size}-row version"
    return [
        Row(
            "load",
            f"fit of a {size}-row isotonic version (Parquet): service peak RSS / before",
            size,
            fit_peak / GB,
            before.service / GB,
            "GB",
        ),
        Row("load", f"{what}: 200s / sent", size, ok, len(N_BINS), "", ALL),
        Row(
            "load",
            f"{what}: slowest / one alone",
            size,
            slowest,
            alone,
            "s",
            SLOWEST_S,
            absolute=True,
        ),
        *_memory(f"{what}: peak RSS", size, peak, begun, None, PEAK_GB),
        Row(
            "load",
            f"diagnostics of the {size}-row version for new bins: seconds / one whole report",
            size,
            binned if answered else math.inf,
            alone,
            "s",
        ),
    ]


def _memory(
    what: str,
    size: str,
    ours: Memory,
    reference: Memory,
    server_target: Target | None,
    service_target: Target | None,
) -> list[Row]:
    """Two rows: the server process's resident memory and the whole service's, ``ours``
    against ``reference``, in GB, each under its own absolute target."""
    return [
        Row("load", f"{what}, {part} / before", size, mine / GB, theirs / GB, "GB", target, True)
        for part, mine, theirs, target in (
            ("serving process", ours.server, reference.server, server_target),
            ("whole service", ours.service, reference.service, service_target),
        )
    ]


def _idle(pid: int) -> list[Row]:
    """The memory after :data:`IDLE_SECONDS` without requests, against right before."""
    progress(f"load: {IDLE_SECONDS:g} s idle")
    busy, processes = memory_now(pid), len(descendants(pid))
    time.sleep(IDLE_SECONDS)
    rest = memory_now(pid)
    progress(f"load: {processes} processes below the server before, {len(descendants(pid))} after")
    after = f"after {IDLE_SECONDS:g} s idle: RSS"
    return _memory(after, "1", rest, busy, SERVER_IDLE_GB, SERVICE_IDLE_GB)


def main() -> None:
    """``python -m bench.load [--quick]``: print the load rows."""
    import sys

    print(markdown(load_rows("--quick" in sys.argv[1:])))


if __name__ == "__main__":
    main()
