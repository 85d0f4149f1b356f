"""A fit whose server dies under it: the client's retry, under the same idempotency key, makes
exactly one version once a server is back on the same database (issue 26).

The server is killed (SIGKILL, its whole process group) while the fit's key is claimed and
no version is stored; another server starts on the same port and database. The client keeps
retrying the connection within its deadline; the new server finds the dead request's claim,
waits for its lease to run out, and fits: one version, answered to the retry."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
from calibration_client import Client, Version

from demo.server import LocalService

NAME = "killed"
KEY = "fit-killed-mid-fit"


def claim(database: Path) -> tuple[str, int | None] | None:
    """The key's row: its owner and version (None while the fit runs), None when absent."""
    with sqlite3.connect(database, timeout=5) as connection:
        row = connection.execute(
            "SELECT owner, version FROM fit_keys WHERE name = ? AND key = ?", (NAME, KEY)
        ).fetchone()
    return None if row is None else (row[0], row[1])


def test_a_fit_retried_across_a_server_killed_mid_fit_makes_one_version(
    tmp_path: Path,
) -> None:
    database = tmp_path / "killed.db"
    url = f"sqlite:///{database}"
    lease = {"CALIBRATION_FIT_KEY_LEASE_SECONDS": "2"}
    first = LocalService(url, **lease)
    port = first.base_url.rsplit(":", 1)[1]
    second: LocalService | None = None
    rng = np.random.default_rng(7)
    scores = rng.normal(size=200_000)
    labels = (rng.random(scores.size) < 1 / (1 + np.exp(-1.3 * scores))).astype(int)
    answered: list[Version | BaseException] = []
    try:
        first.wait_until_ready()
        client = Client(first.base_url, timeout=180.0, retries=40)

        def fit() -> None:
            try:
                answered.append(
                    client.fit(NAME, scores, labels, method="auto", idempotency_key=KEY)
                )
            except BaseException as exc:  # the assertion below shows it
                answered.append(exc)

        thread = threading.Thread(target=fit)
        thread.start()
        deadline = time.monotonic() + 60
        while claim(database) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        held = claim(database)
        assert held is not None, "no fit under way"
        assert held[1] is None, "the fit ended before the server was killed"
        os.killpg(first.process.pid, signal.SIGKILL)
        first.process.wait(10)
        assert claim(database) == held, "the dead fit's claim is left, with no version"

        second = LocalService(url, CALIBRATION_PORT=port, **lease)
        second.base_url = first.base_url
        second.wait_until_ready()
        thread.join(180)
        assert not thread.is_alive()
        assert len(answered) == 1
        assert isinstance(answered[0], Version), answered
        assert answered[0].version == 1
        with Client(second.base_url) as check:
            assert [v.version for v in check.versions(NAME)] == [1]
        done = claim(database)
        assert done is not None
        assert done[1] == 1
        assert done[0] != held[0]
    finally:
        first.stop()
        if second is not None:
            second.stop()
