"""The Python client against the calls a user would write by hand (issue 26), on one
``python -m app.serve`` over loopback (SQLite):

1. One-score predicts: requests per second through :class:`calibration_client.Client`
   against a bare ``httpx.Client`` posting the same JSON (target >= 0.9), each in rounds of
   :data:`ROUND_SECONDS`, alternated.
2. A 10^6-score predict through ``Client`` (which sends it as ``/v2`` binary tensors) against
   the service's own binary infer posted by hand (target <= 1.5), and the same call through
   ``Client`` forced to JSON against it (target >= 5).
3. A 10^6-pair isotonic fit through ``Client`` from numpy arrays (an Arrow IPC stream)
   against posting the JSON body by hand, as a notebook does it (``json=`` of the arrays'
   ``tolist()``; target <= 0.8).
4. 64 concurrent fits through ``Client`` against a service with
   ``CALIBRATION_MAX_CONCURRENT_FITS=1`` and a short queue: every fit answers, under 64
   distinct versions, 1..64, none twice (its refusals, 503 with ``Retry-After``, retried).

``python -m bench.client [--quick]``: ``--quick`` runs small sizes and leaves 4 out (the
smoke test, ``tests/bench/test_bench_smoke.py``); ``python -m bench`` runs the full sizes. Every
loop is bounded in time and every request has a timeout.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import orjson
from calibration_client import Client

from bench.http import migrated_env, serve_module
from bench.table import Row, Target, compare_ms, markdown, progress, size_label

SMALL_PREDICT = Target(0.9, at_least=True)
BIG_PREDICT = Target(1.5)
JSON_SLOWER = Target(5.0, at_least=True)
BIG_FIT = Target(0.8)
ALL_FITS = Target(1.0, at_least=True)
ROUND_SECONDS = 2.0
"""One round of one-score predicts through either client; the rounds alternate."""


def _labelled(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scores = rng.normal(scale=1.5, size=n)
    return scores, (rng.random(n) < 1 / (1 + np.exp(-scores))).astype(np.int64)


def _rate(call: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``call`` over ``seconds``."""
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        done += 1
    return done / (time.perf_counter() - start)


def _small_predict(url: str, rounds: int, seconds: float = ROUND_SECONDS) -> Row:
    progress("client: one-score predicts, Client / bare httpx")
    body = orjson.dumps({"scores": [0.7]})
    headers = {"content-type": "application/json"}
    with Client(url) as client, httpx.Client(base_url=url, timeout=30) as bare:

        def ours() -> None:
            client.predict("bench", [0.7])

        def theirs() -> None:
            answer = bare.post("/v1/calibrators/bench/predict", content=body, headers=headers)
            answer.raise_for_status()
            orjson.loads(answer.content)

        ours(), theirs()
        pairs = [(_rate(ours, seconds), _rate(theirs, seconds)) for _ in range(rounds)]
    mine = statistics.median(p[0] for p in pairs)
    bare_rate = statistics.median(p[1] for p in pairs)
    return Row(
        "client",
        "1-score predict req/s, Client / bare httpx",
        "1",
        mine,
        bare_rate,
        unit="req/s",
        target=SMALL_PREDICT,
    )


def _big_predict(url: str, n: int, repeat: int) -> list[Row]:
    progress(f"client: {size_label(n)}-score predict, Client / binary infer by hand")
    scores = np.random.default_rng(3).normal(scale=1.5, size=n)
    raw = scores.astype("<f8").tobytes()
    tensor = {
        "name": "scores",
        "datatype": "FP64",
        "shape": [n],
        "parameters": {"binary_data_size": len(raw)},
    }
    header = orjson.dumps({"inputs": [tensor], "parameters": {"binary_data_output": True}})
    headers = {
        "content-type": "application/octet-stream",
        "inference-header-content-length": str(len(header)),
    }
    with Client(url, timeout=120) as client, httpx.Client(base_url=url, timeout=120) as bare:

        def through_client() -> None:
            client.predict("bench", scores)

        def through_json() -> None:
            client.predict("bench", scores, transport="json")

        def by_hand() -> None:
            answer = bare.post("/v2/models/bench/infer", content=header + raw, headers=headers)
            answer.raise_for_status()
            length = int(answer.headers["inference-header-content-length"])
            np.frombuffer(answer.content, dtype="<f8", offset=length)

        ours, hand = compare_ms(through_client, by_hand, repeat)
        as_json, binary = compare_ms(through_json, through_client, max(2, repeat // 2))
    size = size_label(n)
    return [
        Row(
            "client",
            "predict through Client / binary /v2 infer by hand",
            size,
            ours,
            hand,
            target=BIG_PREDICT,
        ),
        Row(
            "client",
            "predict through Client as JSON / Client",
            size,
            as_json,
            binary,
            target=JSON_SLOWER,
        ),
    ]


def _big_fit(url: str, n: int, repeat: int) -> Row:
    progress(f"client: {size_label(n)}-pair fit, Client / JSON by hand")
    scores, labels = _labelled(n, 5)
    with Client(url, timeout=300) as client, httpx.Client(base_url=url, timeout=300) as bare:

        def through_client() -> None:
            client.fit("bigfit", scores, labels, method="isotonic")

        def by_hand() -> None:
            body = {"scores": scores.tolist(), "labels": labels.tolist(), "method": "isotonic"}
            bare.post("/v1/calibrators/bigfit/fit", json=body).raise_for_status()

        ours, hand = compare_ms(through_client, by_hand, repeat)
    return Row(
        "client",
        "fit from numpy through Client / JSON by hand",
        size_label(n),
        ours,
        hand,
        target=BIG_FIT,
    )


def _busy_fits(count: int) -> Row:
    progress(f"client: {count} concurrent fits, one at a time on the service")
    settings = {"CALIBRATION_MAX_CONCURRENT_FITS": "1", "CALIBRATION_MAX_QUEUED_FITS": "4"}
    batches = [_labelled(2_000, seed) for seed in range(count)]
    with (
        tempfile.TemporaryDirectory() as folder,
        serve_module({**migrated_env(folder), **settings}) as (url, _),
        Client(url, timeout=300, retries=100) as client,
    ):

        def fit(index: int) -> int:
            scores, labels = batches[index]
            return client.fit("busy", scores, labels, method="platt").version

        with ThreadPoolExecutor(min(count, 16)) as pool:
            made = list(pool.map(fit, range(count)))
        listed = [v.version for v in client.versions("busy")]
    distinct = len(set(made)) if sorted(made) == sorted(listed) == list(range(1, count + 1)) else 0
    return Row(
        "client",
        "concurrent fits answered, distinct versions / fits",
        str(count),
        float(distinct),
        float(count),
        unit="fits",
        target=ALL_FITS,
    )


def client_rows(quick: bool = False) -> list[Row]:
    """The rows above; ``quick``: 10^4 scores and pairs, one short round, no busy fits."""
    n = 10**4 if quick else 10**6
    with tempfile.TemporaryDirectory() as folder, serve_module(migrated_env(folder)) as (url, _):
        with Client(url) as client:
            client.fit("bench", *_labelled(2_000, 1), method="isotonic")
        rows = [_small_predict(url, 1, 0.5) if quick else _small_predict(url, 3)]
        rows += _big_predict(url, n, 3 if quick else 7)
        rows.append(_big_fit(url, n, 1 if quick else 3))
    if (
        not quick
    ):  # a server of its own: the smoke run leaves it to client/tests/test_busy_service.py
        rows.append(_busy_fits(64))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.client", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="small sizes (the smoke test)")
    print(markdown(client_rows(parser.parse_args().quick)))


if __name__ == "__main__":
    main()
