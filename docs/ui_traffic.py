"""A day of synthetic traffic for the demo's calibrators, so that the web view's screenshots
(:mod:`docs.screenshot_ui`) show live numbers: the list's sparkline, the monitoring's windows.

Each calibrator's ``production`` version answers about a thousand predictions spread over the
last 24 hours, more in the daytime (UTC). Their scores are drawn from the demo's calibration
batch (:func:`demo.fits.scored_batches`) class by class, at a positive rate that holds at the
batch's own until :data:`DRIFT_HOURS` ago, then slides to :data:`DRIFTED_RATE`: label shift, as
when the mix of cases a model sees changes, so the scores' PSI, the estimated prior and the
realized log loss move in the last hours. The service computes the probabilities itself
(``POST …/predict`` without ``ids``, so that call logs nothing); the predictions are then
written back-dated straight into its database through the store, as the tests write theirs.
Outcomes arrive one to three hours after their prediction, for :data:`LABELLED` of them: the
last hours are still waiting for theirs, as delayed labels would be.

Seeded: every run in the same hour of the day (UTC) draws the same traffic, placed relative to
the time it runs.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import numpy as np

from app.settings import Settings
from app.store import Database, LoggedPrediction

SEED = 29
HOURS = 24
QUIET_RATE = 20
"""Predictions an hour at night, per calibrator (the mean of a Poisson count)."""
DAYTIME_RATE = 70
"""Predictions an hour added at the peak of the day (14:00 UTC), falling off over ~4 hours."""
DRIFT_HOURS = 8
"""How long before now the positive rate starts to slide."""
DRIFTED_RATE = 0.35
"""The positive rate reached at the end of the day (the batch's is about 0.63)."""
LABELLED = 0.8
"""The share of predictions whose outcome is ever posted."""
DELAY_HOURS = (1.0, 3.0)
"""The range an outcome's delay is drawn from, uniformly."""
JITTER = 0.1
"""The noise added to a drawn score, as a share of its class's standard deviation."""


def hourly_counts(rng: np.random.Generator, start: float) -> np.ndarray:
    """Predictions in each of the :data:`HOURS` hours from ``start`` (a POSIX time): Poisson
    counts around a quiet night and a busy afternoon."""
    hour_of_day = (start // 3600 + np.arange(HOURS)) % 24  # whole hours: the same each day
    rate = QUIET_RATE + DAYTIME_RATE * np.exp(-(((hour_of_day - 14) / 4) ** 2))
    counts: np.ndarray = rng.poisson(rate)
    return counts


def draw_day(
    batch: dict[str, Any], rng: np.random.Generator, now: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The times (POSIX, sorted), scores and true labels of a day of predictions: each label
    drawn at that time's positive rate, then a score of the batch's of that class, jittered."""
    scores, labels = np.asarray(batch["scores"]), np.asarray(batch["labels"])
    start = now - HOURS * 3600
    counts = hourly_counts(rng, start)
    hours = np.repeat(np.arange(HOURS), counts)
    times = np.sort(start + 3600 * (hours + rng.random(hours.size)))
    base = labels.mean()
    drifted = np.clip((times - (now - DRIFT_HOURS * 3600)) / (DRIFT_HOURS * 3600), 0, 1)
    positive_rate = base + (DRIFTED_RATE - base) * drifted
    truth = (rng.random(times.size) < positive_rate).astype(int)
    pools = [scores[labels == k] for k in (0, 1)]
    drawn = np.where(
        truth == 1,
        pools[1][rng.integers(pools[1].size, size=times.size)],
        pools[0][rng.integers(pools[0].size, size=times.size)],
    )
    spread = np.array([pool.std() for pool in pools])[truth]
    return times, drawn + JITTER * spread * rng.standard_normal(times.size), truth


def production_probabilities(
    client: httpx.Client, name: str, scores: np.ndarray
) -> tuple[int, list[float]]:
    """The version ``production`` serves and its probabilities for ``scores``, as the service
    computes them; nothing is logged (no ``ids``)."""
    answer = client.post(
        f"/v1/calibrators/{name}/predict",
        json={"scores": scores.tolist(), "version": "production"},
    )
    answer.raise_for_status()
    found = answer.json()
    return int(found["version"]), [float(p) for p in found["probabilities"]]


def at(seconds: float) -> datetime:
    """A POSIX time as an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, UTC)


def log_day(
    database: Database,
    name: str,
    client: httpx.Client,
    batch: dict[str, Any],
    rng: np.random.Generator,
    now: float,
) -> int:
    """Write a day of ``name``'s traffic into ``database``, and the outcomes that have arrived
    by ``now`` in batches by the hour they arrived; how many predictions."""
    times, scores, truth = draw_day(batch, rng, now)
    version, probabilities = production_probabilities(client, name, scores)
    ids = [f"demo-day-{i:05d}" for i in range(times.size)]
    logged = zip(ids, times.tolist(), scores.tolist(), probabilities, strict=True)
    rows = [LoggedPrediction(name, i, version, at(t), s, p) for i, t, s, p in logged]
    arrived = times + 3600 * rng.uniform(*DELAY_HOURS, size=times.size)
    posted = (rng.random(times.size) < LABELLED) & (arrived <= now)
    arrival_hour = np.ceil((arrived - now) / 3600)  # outcomes come in hourly batches
    with database.transaction(write=True) as repo:
        repo.log_predictions(rows)
        for hour in np.unique(arrival_hour[posted]):
            chosen = np.flatnonzero(posted & (arrival_hour == hour))
            outcomes = [(ids[i], int(truth[i])) for i in chosen]
            repo.record_outcomes(name, outcomes, at(now + 3600 * hour))
    return times.size


def log_a_day(client: httpx.Client, database_url: str, batches: dict[str, dict[str, Any]]) -> None:
    """A day of traffic up to now for each of ``batches``' calibrators (fitted, with a
    ``production`` alias) of the service ``client`` talks to, whose database is at
    ``database_url``."""
    now = datetime.now(UTC).timestamp()
    database = Database(database_url, Settings(database_url=database_url))
    try:
        for index, (name, batch) in enumerate(batches.items()):
            rng = np.random.default_rng([SEED, index])
            count = log_day(database, name, client, batch, rng, now)
            print(f"{name}: {count} predictions logged over the last {HOURS} hours")
    finally:
        database.dispose()
