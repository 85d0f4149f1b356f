"""``make demo`` (:mod:`demo`): its calibrators land through the API, and the URLs it prints
answer."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx

from demo.fits import ALIAS, METHODS, fit_all, links
from tests.client import TestClient
from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_the_demo_fits_every_method_sets_the_alias_and_its_links_answer(
    open_client: TestClient,
) -> None:
    fitted = fit_all(open_client)
    assert set(fitted.versions) == {"breast-cancer-naive-bayes", "breast-cancer-boosted-stumps"}
    for name, versions in fitted.versions.items():
        listed = open_client.get(f"/v1/calibrators/{name}").json()["versions"]
        stored = {v["version"]: v for v in listed}
        assert {m: stored[v]["selection"] is not None for m, v in versions.items()} == {
            "platt": False,
            "isotonic": False,
            "auto": True,
        }
        assert [m for m in METHODS if m != "auto"] == [
            stored[versions[m]]["method"] for m in METHODS if m != "auto"
        ]
        production = open_client.get(f"/v1/calibrators/{name}/versions/{ALIAS}").json()
        assert production["version"] == versions["auto"]
        assert stored[versions["platt"]]["tags"]["dataset"] == "breast_cancer"
    for label, url in links("http://testserver", fitted).items():
        answer = open_client.get(url)
        assert answer.status_code == 200, (label, url, answer.text[:200])


def end_demo(demo: subprocess.Popen[str]) -> None:
    """Stop a demo that is taking too long as ``kill`` does (SIGTERM: it stops the service it
    started, :mod:`demo.server`'s process group of its own), or with SIGKILL if it is stuck."""
    demo.terminate()
    try:
        demo.wait(timeout=30)
    except subprocess.TimeoutExpired:
        demo.kill()


def test_make_demo_starts_a_service_of_its_own_when_none_answers(tmp_path: Path) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    demo = subprocess.Popen(
        [sys.executable, "-m", "demo", "--url", nowhere, "--no-wait"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(120, end_demo, [demo])  # a demo that never ends fails, not hangs
    watchdog.start()
    try:
        stdout, stderr = demo.communicate()
    finally:
        watchdog.cancel()
    assert demo.returncode == 0, stdout + stderr
    assert f"No service answers at {nowhere}" in stdout
    urls = re.findall(r"^(web view|calibrator|diagram|compare):\s+(\S+)$", stdout, re.M)
    assert [label for label, _ in urls] == ["web view", "calibrator", "diagram", "compare"]
    took = float(re.search(r"The demo took ([0-9.]+) s", stdout)[1])  # type: ignore[index]
    assert took < 60
    own = urls[0][1].rsplit("/ui", 1)[0]
    try:  # --no-wait stops the service it started
        httpx.get(f"{own}/healthz", timeout=2)
        raise AssertionError("the demo's own service still answers after --no-wait")
    except httpx.TransportError:
        pass


def test_sigterm_stops_the_demo_and_its_own_service_as_ctrl_c_does() -> None:
    """``kill`` (or make passing SIGTERM on) while the demo serves: the service it started
    stops listening, its temporary folder goes, and the demo exits 0, as after Ctrl-C."""
    nowhere = f"http://127.0.0.1:{free_port()}"
    demo = subprocess.Popen(
        [sys.executable, "-m", "demo", "--url", nowhere],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watchdog = threading.Timer(120, end_demo, [demo])  # a demo that never gets there fails
    watchdog.start()
    try:
        assert demo.stdout is not None
        printed = []
        for line in demo.stdout:
            printed.append(line)
            if line.startswith("Serving until Ctrl-C"):
                break
        text = "".join(printed)
        assert demo.poll() is None, text
        folder = Path(re.search(r"SQLite database in (\S+) \(it stops", text)[1])  # type: ignore[index]
        own = re.search(r"^web view:\s+(\S+)/ui$", text, re.M)[1]  # type: ignore[index]
        assert folder.is_dir()
        assert httpx.get(f"{own}/healthz", timeout=2).status_code == 200
        demo.send_signal(signal.SIGTERM)
        code = demo.wait(timeout=60)
    finally:
        watchdog.cancel()
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert code == 0, demo.stdout.read()
    assert not folder.exists()
    try:
        httpx.get(f"{own}/healthz", timeout=2)
        raise AssertionError("the demo's own service still answers after SIGTERM")
    except httpx.TransportError:
        pass
