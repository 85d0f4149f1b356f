"""The lazy faces of app.figures and app.export: every name they list resolves, and a server
process starts without the heavy packages they put off (matplotlib, onnx), nor scipy.stats."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from app import export, figures

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("face", [figures, export], ids=["figures", "export"])
def test_every_listed_name_resolves(face: ModuleType) -> None:
    for name in face.__all__:
        assert getattr(face, name) is not None, name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        face.nothing  # noqa: B018


def test_the_app_starts_without_matplotlib_onnx_or_scipy_stats() -> None:
    heavy = ("matplotlib", "onnx", "scipy.stats", "sklearn")
    probe = f"import sys, app.main; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_importing_the_app_starts_no_process_and_names_every_job_module() -> None:
    # The fork server starts at the first job, once every job module is named: a worker
    # forked from it has them imported already.
    probe = (
        "import multiprocessing.forkserver as f, app.main, app.service.workers.forking as w; "
        "print(f._forkserver._forkserver_pid, sorted(w.PRELOAD))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    started, preloaded = result.stdout.strip().split(" ", 1)
    assert started == "None"
    for module in ("app.api.routes.calibrators", "app.ui.pages", "app.api.bodies.payloads"):
        assert module in preloaded
