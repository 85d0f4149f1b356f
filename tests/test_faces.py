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
