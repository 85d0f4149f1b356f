"""docs/python.md and docs/shell.md run as written against ``make run``'s server (issue 26), in
a fresh virtual environment that has only ``pip install ./client`` (with the extras the
examples use: scikit-learn, pyarrow, and matplotlib for the picture): so the pages' examples
need nothing of the server's, and the client installs on its own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
URL = "http://127.0.0.1:8000"


def blocks(page: str, language: str) -> str:
    """Every ``language`` block of ``page``, in order, as one script."""
    text = (ROOT / page).read_text()
    return "\n".join(re.findall(rf"```{language}\n(.*?)```", text, re.S))


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment of its own with the client installed from ``./client`` (uv, as
    ``make`` installs: from its cache when the packages were installed before)."""
    venv = tmp_path_factory.mktemp("client-venv") / "venv"
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or "uv"
    env = {**os.environ, "UV_NATIVE_TLS": "1"}
    subprocess.run(
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)], env=env, check=True
    )
    install = [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python")]
    extras = f"{ROOT / 'client'}[sklearn,arrow]"
    subprocess.run([*install, extras, "matplotlib"], env=env, check=True, timeout=600)
    return venv


def run(command: list[str], venv: Path, cwd: Path, script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CALIBRATION_", "PYTHON"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    env["VIRTUAL_ENV"] = str(venv)
    return subprocess.run(
        [*command, script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_python_page_runs_as_written(make_run: str, client_venv: Path, tmp_path: Path) -> None:
    script = blocks("docs/python.md", "python").replace(URL, make_run)
    # the page's claims, checked with its own variables
    script += (
        "\nassert d.calibrated.metrics['ece'] < d.raw.metrics['ece']"
        "\nassert calibrator.version_ == d.version"
        "\nimport sys; assert 'app' not in sys.modules"
        "\nprint('checked')\n"
    )
    done = run([str(client_venv / "bin" / "python"), "-c"], client_venv, tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith("checked")
    assert "422 labels[1] is 2; labels must be 0 or 1" in done.stdout
    assert "404 /problems/not-found" in done.stdout
    assert (tmp_path / "reliability.png").stat().st_size > 10_000
    assert (tmp_path / "credit.png").read_bytes().startswith(b"\x89PNG")


def test_the_shell_page_runs_as_written(make_run: str, client_venv: Path, tmp_path: Path) -> None:
    script = blocks("docs/shell.md", "sh").replace(URL, make_run)
    done = run(["bash", "-euo", "pipefail", "-c"], client_venv, tmp_path, script)
    assert done.returncode == 0, done.stderr
    assert "exit 1: error: calibrator 'no-such-name' not found" in done.stdout
    lines = (tmp_path / "calibrated.csv").read_text().splitlines()
    assert lines[0] == "id,score,probability"
    assert len(lines) == 6
    assert lines[1].startswith("case-0,-2.0,")
    assert (tmp_path / "reliability.png").stat().st_size > 10_000
    assert '"version": 2' in (tmp_path / "v2.json").read_text()
    assert done.stdout.rstrip().endswith("[2, 1]")


def test_the_readme_python_block_runs_as_written(
    make_run: str, client_venv: Path, tmp_path: Path
) -> None:
    """The README's Python block; its calibrator renamed, since the README's curl walk
    (tests/docs/test_end_to_end.py) fits ``example`` on the same server."""
    script = blocks("README.md", "python").replace(URL, make_run)
    script = script.replace('"example"', '"example-from-python"')
    done = run([str(client_venv / "bin" / "python"), "-c"], client_venv, tmp_path, script)
    assert done.returncode == 0, done.stderr
    probabilities = [float(p) for p in done.stdout.strip(" []\n").split()]
    assert len(probabilities) == 3
    assert probabilities == sorted(probabilities)
