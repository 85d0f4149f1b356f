"""The live calibration gauges: one tick of the task, then ``GET /metrics``, against an
independent computation of the window; the cap, deletes, outages, several processes, and the
example alert rules that read the gauges."""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from sklearn.metrics import log_loss
from sqlalchemy.exc import OperationalError

from app.main import create_app
from app.observability import (
    Leadership,
    LiveSnapshot,
    LiveValues,
    exposition,
    publish_live,
    published_live,
)
from app.observability.live_gauges import GAUGES, PRIOR_GAUGES, SKIPPED
from app.service.traffic.live import STALE_PERIODS, last_complete_window
from app.settings import Settings
from app.store import Database, Repository
from app.store.traffic.rows import LoggedPrediction
from tests.api.helpers import ece, psi, sigmoid_batch
from tests.client import TestClient

ROOT = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 11, 20, tzinfo=UTC)
NOW = T0 + timedelta(hours=2, minutes=30)
"""The ticks' now: the most recent complete 1 h window is [T0 + 1 h, T0 + 2 h)."""
PERIOD = 3600.0
"""The task's period in these tests: it never ticks by itself while a test runs."""
LIVE_NAMES = {name for name, _ in GAUGES.values()} | {name for name, _ in PRIOR_GAUGES}

Opener = Callable[..., TestClient]


@pytest.fixture(autouse=True)
def no_snapshot() -> Iterator[None]:
    """Each test starts and ends without a published snapshot (one already expired)."""
    publish_live(LiveSnapshot({}, 0, expires_at=0.0))
    yield
    publish_live(LiveSnapshot({}, 0, expires_at=0.0))


@pytest.fixture
def open_client(database_url: str, database: Database) -> Iterator[Opener]:
    """Opens the app on the test's database with these settings (closed after the test)."""
    with ExitStack() as stack:

        def open_(**settings: Any) -> TestClient:
            chosen = Settings(database_url=database_url, live_metrics_seconds=PERIOD, **settings)
            app = create_app(chosen, database=database)
            return stack.enter_context(TestClient(app, raise_server_exceptions=False))

        yield open_


def fit(client: TestClient, name: str, seed: int = 0, n: int = 400) -> list[float]:
    """Fit ``name`` (platt) on a fresh sigmoid batch; its scores, the PSI's reference."""
    batch = sigmoid_batch(n, seed=seed)
    response = client.post(f"/v1/calibrators/{name}/fit", json={**batch, "method": "platt"})
    assert response.status_code == 201, response.text
    scores: list[float] = batch["scores"]
    return scores


def log_traffic(
    client: TestClient,
    name: str,
    version: int,
    start: datetime,
    n: int,
    *,
    seed: int,
    labelled_every: int = 2,
) -> dict[str, np.ndarray]:
    """Log ``n`` predictions of ``name`` by ``version`` spread over the hour from ``start``
    (drawn shifted from the fitting batch), every ``labelled_every``-th one with an outcome
    (0: none); what was logged, as arrays."""
    rng = np.random.default_rng(seed)
    scores = rng.normal(0.5, 1.5, n)
    probabilities = 1 / (1 + np.exp(-1.2 * scores))
    labels = (rng.random(n) < probabilities).astype(int)
    labelled = np.zeros(n, dtype=bool)
    if labelled_every:
        labelled[::labelled_every] = True
    rows = [
        LoggedPrediction(
            name,
            f"{name}-{start:%H}-v{version}-{i}",
            version,
            start + timedelta(seconds=float(s)),
            score=float(scores[i]),
            probability=float(probabilities[i]),
        )
        for i, s in enumerate(rng.uniform(0, 3599, n))
    ]
    outcomes = [(rows[i].client_id, int(labels[i])) for i in np.flatnonzero(labelled)]
    service = client.app.state.service  # type: ignore[attr-defined]
    with service.database.transaction(write=True) as repo:
        repo.log_predictions(rows)
        repo.record_outcomes(name, outcomes, start)
    return {"scores": scores, "probabilities": probabilities, "labels": labels, "mask": labelled}


def tick(client: TestClient, now: datetime = NOW) -> bool:
    """One computation of the app's live gauges, as its thread runs them."""
    live = client.app.state.live_metrics  # type: ignore[attr-defined]
    published: bool = live.tick(now)
    return published


def gauges(text: str) -> dict[str, dict[str, float]]:
    """The live gauges of an exposition: per metric, the value per calibrator (``""`` for
    the one without a label)."""
    found: dict[str, dict[str, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        if family.name in LIVE_NAMES | {SKIPPED[0]}:
            for sample in family.samples:
                found[sample.name][sample.labels.get("calibrator", "")] = sample.value
    return found


def scrape(client: TestClient) -> dict[str, dict[str, float]]:
    response = client.get("/metrics")
    assert response.status_code == 200
    return gauges(response.text)


def test_the_window_complete_at_now_is_the_previous_one() -> None:
    assert last_complete_window(NOW, "1h") == (T0 + timedelta(hours=1), T0 + timedelta(hours=2))
    assert last_complete_window(T0 + timedelta(hours=2), "1h")[1] == T0 + timedelta(hours=2)
    assert last_complete_window(NOW, "1d") == (T0 - timedelta(days=1), T0)


def test_the_gauges_are_the_most_answered_versions_numbers(open_client: Opener) -> None:
    client = open_client()
    fit(client, "churn", seed=1)
    reference = np.asarray(fit(client, "churn", seed=2, n=800))  # v2: the most answered
    fit(client, "fraud", seed=3)
    window = T0 + timedelta(hours=1)
    v2 = log_traffic(client, "churn", 2, window, 300, seed=10)
    log_traffic(client, "churn", 1, window, 100, seed=11)
    log_traffic(client, "churn", 2, T0, 200, seed=12)  # the window before
    log_traffic(client, "churn", 2, T0 + timedelta(hours=2), 200, seed=13)  # still running
    fraud = log_traffic(client, "fraud", 1, window, 50, seed=14, labelled_every=0)

    assert tick(client)
    found = scrape(client)

    p, y = v2["probabilities"][v2["mask"]], v2["labels"][v2["mask"]]
    assert found["calibration_live_version"] == {"churn": 2.0, "fraud": 1.0}
    assert found["calibration_live_labelled"] == {"churn": 150.0, "fraud": 0.0}
    assert found["calibration_live_log_loss"]["churn"] == pytest.approx(log_loss(y, p), rel=1e-9)
    assert found["calibration_live_ece"]["churn"] == pytest.approx(ece(p, y), rel=1e-9)
    assert found["calibration_traffic_psi"]["churn"] == pytest.approx(
        psi(reference, v2["scores"]), rel=1e-9
    )
    assert found["calibration_traffic_psi"]["churn"] > 0.1  # the traffic was drawn shifted
    # fraud's window has traffic, no outcome: a shift, and no log loss nor ECE series at all
    fraud_reference = np.asarray(sigmoid_batch(400, seed=3)["scores"])
    assert found["calibration_traffic_psi"]["fraud"] == pytest.approx(
        psi(fraud_reference, fraud["scores"]), rel=1e-9
    )
    assert "fraud" not in found["calibration_live_log_loss"]
    assert "fraud" not in found["calibration_live_ece"]
    assert found["calibration_live_skipped_calibrators"] == {"": 0.0}


def test_the_prior_gauges_are_the_live_versions_window_prior(open_client: Opener) -> None:
    client = open_client()
    fit(client, "churn", seed=1)
    batch_labels = sigmoid_batch(800, seed=2)["labels"]
    fit(client, "churn", seed=2, n=800)
    window = T0 + timedelta(hours=1)
    log_traffic(client, "churn", 2, window, 300, seed=10, labelled_every=0)  # no outcomes
    log_traffic(client, "churn", 1, window, 100, seed=11)

    assert tick(client)
    response = client.get("/metrics")
    found = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.text)
        if family.name in {name for name, _ in PRIOR_GAUGES}
        for sample in family.samples
    }
    labels = (("calibrator", "churn"), ("class", "1"), ("version", "2"))
    assert {key[1] for key in found} == {labels}  # the most answered version's only
    monitoring = client.get(
        "/v1/calibrators/churn/monitoring",
        params={"window": "1h", "since": window.isoformat(), "until": NOW.isoformat()},
    ).json()["windows"]
    (row,) = (row for row in monitoring if row["version"] == 2)
    prior = row["prior"]
    assert found[("calibration_live_prior_training", labels)] == pytest.approx(
        np.mean(batch_labels), rel=1e-12
    )
    assert found[("calibration_live_prior_estimated", labels)] == prior["estimated"]
    assert found[("calibration_live_prior_low", labels)] == prior["interval"][0]
    assert found[("calibration_live_prior_high", labels)] == prior["interval"][1]
    # the traffic was drawn with more positives than the fitting batch: the shift is seen
    assert prior["interval"][0] > np.mean(batch_labels)


def test_the_cap_leaves_out_the_last_names_and_counts_them(
    open_client: Opener, caplog: pytest.LogCaptureFixture
) -> None:
    client = open_client(live_metrics_max_calibrators=2)
    for seed, name in enumerate(("gamma", "alpha", "beta")):
        fit(client, name, seed=seed, n=200)
        log_traffic(client, name, 1, T0 + timedelta(hours=1), 40, seed=seed)

    with caplog.at_level(logging.WARNING, logger="app.live_metrics"):
        assert tick(client)
    found = scrape(client)

    for name in LIVE_NAMES:
        assert set(found[name]) == {"alpha", "beta"}, name
    assert found["calibration_live_skipped_calibrators"] == {"": 1.0}
    assert "1 calibrators with traffic past the first 2" in caplog.text


def test_a_deleted_or_quiet_calibrator_loses_its_series(open_client: Opener) -> None:
    client = open_client()
    for seed, name in enumerate(("alpha", "beta", "gamma")):
        fit(client, name, seed=seed, n=200)
        log_traffic(client, name, 1, T0 + timedelta(hours=1), 40, seed=seed)
    log_traffic(client, "gamma", 1, T0 + timedelta(hours=2), 40, seed=7)
    assert tick(client)
    assert set(scrape(client)["calibration_live_ece"]) == {"alpha", "beta", "gamma"}

    assert client.delete("/v1/calibrators/beta").status_code == 204
    assert tick(client)
    assert set(scrape(client)["calibration_live_ece"]) == {"alpha", "gamma"}

    assert tick(client, NOW + timedelta(hours=1))  # only gamma sent traffic in that hour
    assert {name: set(found) for name, found in scrape(client).items()} == {
        **{name: {"gamma"} for name in LIVE_NAMES},
        SKIPPED[0]: {""},
    }


def test_an_outage_keeps_the_last_numbers_until_they_expire(
    open_client: Opener, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    client = open_client()
    fit(client, "churn", n=200)
    log_traffic(client, "churn", 1, T0 + timedelta(hours=1), 40, seed=1)
    assert tick(client)
    before = scrape(client)

    def unreachable(*args: object) -> None:
        raise OperationalError("SELECT", {}, ConnectionError("server closed the connection"))

    monkeypatch.setattr(Repository, "calibrators_with_traffic", unreachable)
    with caplog.at_level(logging.WARNING, logger="app.live_metrics"):
        assert not tick(client)  # and nothing raised
    assert "the database is unavailable" in caplog.text
    assert scrape(client) == before
    assert published_live(now=time.time() + STALE_PERIODS * PERIOD + 1) is None

    def broken(*args: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Repository, "calibrators_with_traffic", broken)
    assert not tick(client)
    assert scrape(client) == before


def test_a_calibrator_whose_numbers_fail_is_left_out_of_that_tick(
    open_client: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = open_client()
    for seed, name in enumerate(("alpha", "beta")):
        fit(client, name, seed=seed, n=200)
        log_traffic(client, name, 1, T0 + timedelta(hours=1), 40, seed=seed)
    cases = client.app.state.service.traffic  # type: ignore[attr-defined]
    monitoring = cases.monitoring

    def broken_for_beta(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "beta":
            raise RuntimeError("a bug")
        return monitoring(name, *args, **kwargs)

    monkeypatch.setattr(cases, "monitoring", broken_for_beta)
    assert tick(client)
    assert set(scrape(client)["calibration_live_labelled"]) == {"alpha"}


def test_the_lifespan_starts_and_stops_the_task(database_url: str, database: Database) -> None:
    off = Settings(database_url=database_url, live_metrics_seconds=0)
    with TestClient(create_app(off, database=database)) as client:
        assert client.app.state.live_metrics is None  # type: ignore[attr-defined]
    on = Settings(database_url=database_url, live_metrics_seconds=PERIOD)
    with TestClient(create_app(on, database=database)) as client:
        live = client.app.state.live_metrics  # type: ignore[attr-defined]
        assert live._thread.is_alive()
    assert not live._thread.is_alive()


CHILD = """
import sys, time
from app.observability import Leadership, LiveSnapshot, LiveValues, publish_live
leadership = Leadership()
assert leadership.claim()
values = LiveValues(version=2, labelled=150, log_loss=0.5, ece=0.03, psi=None)
publish_live(LiveSnapshot({"churn": values}, skipped=1, expires_at=time.time() + 600))
print("published", flush=True)
sys.stdin.readline()
"""


def test_one_worker_computes_and_every_worker_exports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With PROMETHEUS_MULTIPROC_DIR: the worker that leads publishes, another one's scrape
    exports it, and the lead passes on when the leader exits."""
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    leader = subprocess.Popen(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert leader.stdout is not None
        assert leader.stdin is not None
        assert leader.stdout.readline().strip() == "published"
        follower = Leadership()
        assert not follower.claim()

        found = gauges(exposition().decode())
        assert found["calibration_live_version"] == {"churn": 2.0}
        assert found["calibration_live_labelled"] == {"churn": 150.0}
        assert found["calibration_live_log_loss"] == {"churn": 0.5}
        assert found["calibration_live_ece"] == {"churn": 0.03}
        assert "calibration_traffic_psi" not in found  # none: no series
        assert found["calibration_live_skipped_calibrators"] == {"": 1.0}
        assert published_live(now=time.time() + 601) is None

        leader.stdin.close()
        assert leader.wait(timeout=20) == 0
        assert follower.claim()
        follower.release()
    finally:
        if leader.poll() is None:
            leader.kill()
            leader.wait()


def test_a_snapshot_replaces_the_last_one_whole() -> None:
    values = LiveValues(version=1, labelled=10, log_loss=0.6, ece=0.1, psi=0.2)
    publish_live(LiveSnapshot({"a": values, "b": values}, 0, time.time() + 60))
    publish_live(LiveSnapshot({"b": values}, 0, time.time() + 60))
    assert set(gauges(exposition().decode())["calibration_live_ece"]) == {"b"}


# -- the example alert rules ------------------------------------------------------------------

ALERTS = ROOT / "deploy" / "calibration-alerts.yml"


def exported_names() -> set[str]:
    """Every series name the service's registry can export (counters with ``_total``,
    histograms with their three series)."""
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}
    return {
        family.name + suffix
        for family in REGISTRY.collect()
        if family.name.startswith("calibration_")
        for suffix in ("", *suffixes.get(family.type, ()))
    }


def rules() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"]]


def test_every_alert_reads_metrics_the_service_exports() -> None:
    exported = exported_names()
    assert exported >= LIVE_NAMES
    for rule in rules():
        used = set(re.findall(r"\bcalibration_[a-z_]+\b", rule["expr"]))
        assert used, rule["alert"]
        assert used <= exported, (rule["alert"], used - exported)
        assert re.fullmatch(r"\d+[smhd]", rule["for"]), rule["alert"]
        assert rule["labels"]["severity"] in {"info", "warning", "critical"}
        assert rule["annotations"]["summary"]


def test_the_alerts_cover_ece_a_psi_above_a_quarter_and_a_prior_shift() -> None:
    metrics = ("calibration_live_ece", "calibration_traffic_psi", "calibration_live_prior_low")
    by_metric = {metric: rule for rule in rules() for metric in metrics if metric in rule["expr"]}
    assert set(by_metric) == set(metrics)
    shift = by_metric["calibration_live_prior_low"]["expr"]
    assert {"calibration_live_prior_high", "calibration_live_prior_training"} <= set(
        re.findall(r"\bcalibration_[a-z_]+\b", shift)
    )
    assert re.search(r"> 0\.25\b", by_metric["calibration_traffic_psi"]["expr"])
    assert re.search(r"> 0\.\d+", by_metric["calibration_live_ece"]["expr"])
