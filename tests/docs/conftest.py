"""One server for the docs' pages run as written on SQLite: the README's path, ``make migrate``'s
command on a fresh file, then ``python -m app.serve`` with one worker and no keys, as
``make run`` serves (:func:`make_run`).

The pages' tests share it: each fits calibrators of names its own, so none sees another's
versions. A server's start costs seconds of imports in it and more in its workers' fork server
(a fit waits for those), once per package instead of once per module.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from demo.server import LocalService

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="package")
def make_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of ``make run``'s server over a SQLite file that ``python -m
    app.store.migrate`` created (its folder too) and migrated."""
    folder = tmp_path_factory.mktemp("make-run")
    database_url = f"sqlite:///{folder / 'data' / 'calibration.db'}"
    env = {**os.environ, "CALIBRATION_DATABASE_URL": database_url}
    migrate = [sys.executable, "-m", "app.store.migrate"]
    subprocess.run(migrate, env=env, cwd=ROOT, check=True, timeout=120)
    service = LocalService(database_url, folder / "serve.log", workers=1)
    try:
        service.wait_until_ready()
        yield service.base_url
    finally:
        service.stop()
