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
  the same reports without a picture or a page.
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
from bench.table import Row, Target, markdown, median_seconds, progress

VERSIONS = 50
ROWS = 1_000
MOVES = 20
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
    return {
        "kb": (len(heavy) / 1024, len(light) / 1024),
        "warm": (warm * 1000, listing * 1000),
        "first": (sorted(firsts)[1] * 1000, sorted(reported)[1] * 1000),
    }


def _once(run: Any) -> float:
    """The seconds of one call of ``run``."""
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    print(markdown(page_rows()))


if __name__ == "__main__":
    main()
