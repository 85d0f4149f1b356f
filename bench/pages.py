"""The web view's calibrator page: its weight and its server time at 50 versions.

``python -m bench.pages`` prints the rows alone. The issue's targets: a calibrator with 50
versions renders in at most 150 KB of HTML and 300 ms of server time. Timed over loopback
HTTP against ``python -m app.serve`` as ``make run`` starts it (the page's job in a worker
process of the bounded pool), on a SQLite file, with a calibrator of 50 Platt versions
fitted on 1,000 pairs each, ``production`` moved 20 times. References in the same run:

- weight: the page of a calibrator with one version (what does not grow with versions);
- warm time (the shown version's reports kept, as for every view but a version's first): the
  API's JSON of the same 50 version records, ``GET /v1/calibrators/{name}?limit=50``;
- first view (the shown version's reports computed: 1,000 resamples, the smooth curve and
  its band): the API's ``GET …/diagnostics`` of a version not yet reported, which computes
  the same reports without a picture or a page;
- with 10^5 predictions of the live version logged (half labelled), the first view after new
  traffic (its table of the last 7 days computed) against ``GET …/monitoring?window=1d`` of
  the same version and days, and the views after (the table kept while no traffic comes)
  against the warm page without traffic.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.fits import batch
from bench.http import serve_module
from bench.table import Row, Target, markdown, median_seconds, progress, size_label

VERSIONS = 50
ROWS = 1_000
MOVES = 20
LOGGED = 10**5
"""Predictions of the live version logged for the rows with traffic, half labelled."""
KILOBYTES = Target(150)
MILLISECONDS = Target(300)


def page_rows(repeat: int = 7) -> list[Row]:
    """The page's weight, its warm time (median of ``repeat``) and its first-view time (median
    of three versions' first views), each against its reference."""
    progress(f"calibrator page of {VERSIONS} versions")
    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "CALIBRATION_DATABASE_URL": f"sqlite:///{Path(folder) / 'b.db'}"}
        with serve_module(env) as (url, _), httpx.Client(base_url=url, timeout=120) as client:
            found = _measure(client, repeat)
    size = f"{VERSIONS} versions"
    return [
        Row("web view", "calibrator page (HTML) / one version's", size, *found["kb"], "KB",
            KILOBYTES, True),
        Row("web view", "calibrator page, warm / API JSON of the 50 records", size,
            *found["warm"], "ms", MILLISECONDS, True),
        Row("web view", "calibrator page, a version's first view / its first diagnostics",
            size, *found["first"], "ms"),
        Row("web view", "page after new traffic / GET monitoring (1d, 7 days)",
            f"{size}, {size_label(LOGGED)} logged", *found["traffic"], "ms"),
        Row("web view", "page with traffic, warm / without traffic, warm",
            f"{size}, {size_label(LOGGED)} logged", *found["kept"], "ms", MILLISECONDS, True),
    ]  # fmt: skip


def _measure(client: httpx.Client, repeat: int) -> dict[str, tuple[float, float]]:
    """Fit the calibrators, then measure: (ours, reference) of each row."""
    f, y, _ = batch(ROWS, tied=False)
    body: dict[str, Any] = {"scores": f.tolist(), "labels": y.astype(int).tolist()}
    for name, count in (("many", VERSIONS), ("one", 1)):
        for _ in range(count):
            fitted = client.post(f"/v1/calibrators/{name}/fit", json={**body, "method": "platt"})
            fitted.raise_for_status()
    for move in range(MOVES):
        client.put("/v1/calibrators/many/aliases/production", json={"version": 10 + move})
    client.put("/v1/calibrators/one/aliases/production", json={"version": 1})

    def page(path: str) -> bytes:
        answer = client.get(path)
        answer.raise_for_status()
        return answer.content

    heavy, light = page("/ui/calibrators/many"), page("/ui/calibrators/one")
    warm = median_seconds(lambda: page("/ui/calibrators/many"), repeat)
    listing = median_seconds(lambda: page("/v1/calibrators/many?limit=50"), repeat)
    firsts = [_once(lambda v=v: page(f"/ui/calibrators/many?version={v}")) for v in (1, 2, 3)]
    reported = [
        _once(lambda v=v: page(f"/v1/calibrators/many/versions/{v}/diagnostics")) for v in (4, 5, 6)
    ]
    _log(client, f, y)
    live = client.get("/v1/calibrators/many/versions/production").json()["version"]
    after = _once(lambda: page("/ui/calibrators/many"))
    recomputed = median_seconds(
        lambda: page(f"/v1/calibrators/many/monitoring?window=1d&version={live}"), 3, warmup=0
    )
    kept = median_seconds(lambda: page("/ui/calibrators/many"), repeat)
    return {
        "traffic": (after * 1000, recomputed * 1000),
        "kept": (kept * 1000, warm * 1000),
        "kb": (len(heavy) / 1024, len(light) / 1024),
        "warm": (warm * 1000, listing * 1000),
        "first": (sorted(firsts)[1] * 1000, sorted(reported)[1] * 1000),
    }


def _log(client: httpx.Client, f: Any, y: Any) -> None:
    """Log :data:`LOGGED` predictions of ``many``'s live version, outcomes for half, and wait
    until they are all written."""
    chunk = 10_000
    for start in range(0, LOGGED, chunk):
        ids = [f"p{i}" for i in range(start, start + chunk)]
        scores = [float(f[i % ROWS]) for i in range(start, start + chunk)]
        logged = client.post("/v1/calibrators/many/predict", json={"scores": scores, "ids": ids})
        logged.raise_for_status()
        labels = [int(y[i % ROWS]) for i in range(start, start + chunk, 2)]
        outcomes = {"ids": ids[::2], "labels": labels}
        client.post("/v1/calibrators/many/outcomes", json=outcomes).raise_for_status()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        windows = client.get("/v1/calibrators/many/monitoring?bootstrap=0").json()["windows"]
        if sum(w["n_labelled"] for w in windows) == LOGGED // 2:
            return
        time.sleep(0.5)
    raise RuntimeError("the logged predictions were not all written within 60 s")


def _once(run: Any) -> float:
    """The seconds of one call of ``run``."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    print(markdown(page_rows()))


if __name__ == "__main__":
    main()
