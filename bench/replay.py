"""A real data set replayed as a calibrator's traffic, hour by hour, for the validation of the
monitoring windows' ``estimated``, ``realized`` and ``prior`` and of ``adjust``
(:mod:`bench.estimates_quality`, ``tests/validation/test_estimates_on_real_data.py``).

A :class:`Case` is a data set of :mod:`bench.datasets`, a model, a calibration method and a
seed. The model (a family of :mod:`bench.models`, or a logistic regression on one column,
``feature:<j>``, a deliberately weak one) is trained on the train split of
:func:`bench.protocol.split`; the calibrator is fitted through the service on the model's
scores of the calibration split (version 1); the test split is then logged as traffic, with
the probabilities version 1 predicts for its scores, every row labelled, an hour a window:

- ``plain``: the test split cut into :attr:`Plan.windows` disjoint windows at random. Disjoint
  windows of one split are independent draws of the data set's distribution, so a version
  calibrated on that distribution has each window's realized measures inside their bands
  95% of the time;
- ``flipped``: the same windows with :attr:`Plan.flip` of their labels flipped (concept
  shift: p(y | x) changed, the probabilities did not);
- ``up`` and ``down``: label shift. Windows of :attr:`Plan.shifted_rows` rows drawn with
  replacement from the test split's positives and negatives apart, so that the positive
  rate is exactly the training prior (the calibration split's) times each of
  :attr:`Plan.factors` while p(x | y) stays the test split's. A rate above
  :data:`HIGHEST_RATE` is not drawn (a base rate of 0.5 has no double).

Each window keeps what the service answered (its monitoring row) beside the independent
references of :mod:`bench.estimate_references`; a shifted window also the prior that
maximises the likelihood of the *whole* test split weighted to the window's rate (what EM
converges to as the window grows: the estimand, which differs from the true rate by what
miscalibration on the test split costs), BBSE's estimate, and the log losses of version 1
and of versions adjusted to the true rate and to the window's own traffic
(``"prior": "traffic"``).

The service is reached through :class:`Service`: the test's adapter speaks HTTP to the app,
:class:`InProcess` calls :class:`~app.service.use_cases.CalibrationService` directly.
"""

from __future__ import annotations

import functools
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from app.service.adjustments import GivenPriors, TrafficPriors
from app.service.batches import validate_batch
from app.service.use_cases import CalibrationService
from app.settings import Settings
from app.store import Database
from app.store.migrate import upgrade
from app.store.traffic.rows import LoggedPrediction
from bench import datasets, models
from bench.estimate_references import (
    FloatArray,
    bbse_prior,
    hosmer_lemeshow_p,
    likeliest_prior,
    realized,
    spiegelhalter_p,
)
from bench.protocol import log_loss, split

HIGHEST_RATE = 0.8
"""The highest positive rate a shifted window is drawn at."""
HOUR = timedelta(hours=1)


def first_hour() -> datetime:
    """Where a replay's first window starts: midnight UTC today, a whole hour (windows
    align), within the prediction log's retention, and a day PostgreSQL's log has a
    partition for (it makes them for today and the days ahead)."""
    return datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class Case:
    """A data set, a model (a family of :mod:`bench.models` or ``feature:<j>``), a method of
    the service and a seed of the split and the model."""

    dataset: str
    model: str
    method: str
    seed: int = 0

    @property
    def name(self) -> str:
        """The calibrator's name."""
        return f"{self.dataset}.{self.model.replace(':', '-')}.{self.method}.{self.seed}"


@dataclass(frozen=True)
class Scored:
    """A case's model scores and labels on the calibration and the test split."""

    case: Case
    scores_cal: FloatArray
    labels_cal: FloatArray
    scores_test: FloatArray
    labels_test: FloatArray


@functools.cache
def _data(name: str) -> datasets.DataSet:
    return datasets.load(name)


def score(case: Case) -> Scored:
    """Train the case's model on the train split; its scores of the other two."""
    data = _data(case.dataset)
    train, cal, test = split(data.labels.size, case.seed)
    X, y = data.features, data.labels
    if case.model.startswith("feature:"):
        column = [int(case.model.removeprefix("feature:"))]
        model = LogisticRegression().fit(X[train][:, column], y[train])
        scores_cal, scores_test = (
            model.decision_function(X[part][:, column]) for part in (cal, test)
        )
    else:
        (family,) = (f for f in models.FAMILIES if f.name == case.model)
        scores_cal, scores_test = family.scores(case.seed, X[train], y[train], X[cal], X[test])
    return Scored(
        case,
        np.asarray(scores_cal, dtype=np.float64),
        y[cal].astype(np.float64),
        np.asarray(scores_test, dtype=np.float64),
        y[test].astype(np.float64),
    )


class Service(Protocol):
    """What a replay asks of the service."""

    def fit(self, name: str, scores: FloatArray, labels: FloatArray, method: str) -> None:
        """Fit version 1 of ``name``."""

    def predict(self, name: str, version: int, scores: FloatArray) -> FloatArray:
        """The version's probabilities of ``scores``."""

    def log(
        self,
        name: str,
        start: datetime,
        scores: FloatArray,
        probabilities: FloatArray,
        labels: FloatArray,
    ) -> None:
        """Log version 1's predictions at times spread over the hour from ``start``, and
        their labels."""

    def monitoring(self, name: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        """The hourly monitoring rows of [since, until)."""

    def adjust(self, name: str, body: dict[str, Any]) -> tuple[int, float]:
        """Version 1 adjusted as ``body`` says (the adjust route's body); the new version's
        number and the prior it was adjusted to."""


def log_traffic(
    database: Database,
    name: str,
    start: datetime,
    scores: FloatArray,
    probabilities: FloatArray,
    labels: FloatArray,
) -> None:
    """Log version 1's predictions of ``name`` in the service's ``database``, at times spread
    evenly over the hour from ``start``, with their labels, as the tests of monitoring do
    (the prediction log's own writer stamps the present time)."""
    step = HOUR / scores.size
    prefix = f"{start:%Y%m%d%H}"
    ids = [f"{prefix}.{i}" for i in range(scores.size)]
    rows = [
        LoggedPrediction(name, ids[i], 1, start + i * step, score=s, probability=p)
        for i, (s, p) in enumerate(zip(scores.tolist(), probabilities.tolist(), strict=True))
    ]
    with database.transaction(write=True) as repo:
        repo.log_predictions(rows)
        repo.record_outcomes(name, list(zip(ids, labels.astype(int).tolist(), strict=True)), start)


@dataclass(frozen=True)
class Plan:
    """The windows of a replay."""

    windows: int = 8
    """Disjoint windows the test split is cut into (fewer for a split of under
    ``windows * min_rows`` rows)."""
    min_rows: int = 50
    flip: float = 0.3
    shifted: int = 3
    """Windows per shift factor."""
    shifted_rows: int = 5000
    factors: tuple[float, ...] = (2.0, 0.5)
    adjust: bool = True


@dataclass
class Window:
    """One hour of replayed traffic: what was logged, what the service said of it, and the
    references."""

    kind: str
    hour: int
    labels: FloatArray
    probabilities: FloatArray
    row: dict[str, Any] = field(default_factory=dict)
    reference: dict[str, float | None] = field(default_factory=dict)
    estimand: float | None = None
    bbse: float | None = None
    adjusted: dict[str, FloatArray] = field(default_factory=dict)
    """Shifted windows: the probabilities of the version adjusted to the true rate (``true``)
    and of the one adjusted to the window's own traffic (``traffic``)."""
    log_losses: dict[str, float] = field(default_factory=dict)
    """Shifted windows: of version 1 (``parent``) and of each adjusted version."""
    traffic_prior: float | None = None
    """The prior the ``traffic`` adjustment used."""

    @property
    def true_rate(self) -> float:
        return float(self.labels.mean())

    def covered(self, measure: str) -> bool | None:
        """Whether the reference's realized ``measure`` lies in the service's band of its
        estimate (None when either is missing)."""
        value = self.reference.get(measure)
        band = (self.row.get("estimated") or {}).get("intervals", {}).get(measure)
        if value is None or band is None:
            return None
        return bool(band[0] <= value <= band[1])


@dataclass
class Replayed:
    """A case replayed: its model's discrimination, its calibration on the test split, and
    its windows."""

    case: Case
    n_test: int
    auc: float
    training: float
    spiegelhalter: float
    hosmer_lemeshow: float
    windows: list[Window]
    seconds: float

    @property
    def calibrated(self) -> bool:
        """Calibrated on the test distribution: neither Spiegelhalter's nor Hosmer-Lemeshow's
        test rejects at 5% on the whole test split."""
        return self.spiegelhalter >= 0.05 and self.hosmer_lemeshow >= 0.05

    def of_kind(self, *kinds: str) -> list[Window]:
        return [w for w in self.windows if w.kind in kinds]


def replay(service: Service, scored: Scored, plan: Plan, start: datetime) -> Replayed:
    """Fit, log every window of ``plan`` from ``start`` on, monitor, and adjust."""
    began = time.perf_counter()
    name, y_test = scored.case.name, scored.labels_test
    rng = np.random.default_rng(scored.case.seed)
    service.fit(name, scored.scores_cal, scored.labels_cal, scored.case.method)
    p_test = service.predict(name, 1, scored.scores_test)
    p_cal = service.predict(name, 1, scored.scores_cal)
    training = float(scored.labels_cal.mean())

    drawn: list[tuple[str, NDArray[np.intp], FloatArray]] = []
    count = max(1, min(plan.windows, y_test.size // plan.min_rows))
    parts = np.array_split(rng.permutation(y_test.size), count)
    drawn += [("plain", part, y_test[part]) for part in parts]
    for part in parts:
        flipped = y_test[part].copy()
        chosen = rng.choice(part.size, round(plan.flip * part.size), replace=False)
        flipped[chosen] = 1 - flipped[chosen]
        drawn.append(("flipped", part, flipped))
    positives, negatives = np.flatnonzero(y_test == 1), np.flatnonzero(y_test == 0)
    for factor in plan.factors:
        ones = round(plan.shifted_rows * training * factor)
        if ones / plan.shifted_rows > HIGHEST_RATE:
            continue
        kind = "up" if factor > 1 else "down"
        for _ in range(plan.shifted):
            rows = rng.permutation(
                np.concatenate(
                    [
                        rng.choice(positives, ones),
                        rng.choice(negatives, plan.shifted_rows - ones),
                    ]
                )
            )
            drawn.append((kind, rows, y_test[rows]))

    windows = []
    for hour, (kind, rows, labels) in enumerate(drawn):
        at = start + hour * HOUR
        service.log(name, at, scored.scores_test[rows], p_test[rows], labels)
        windows.append(Window(kind, hour, labels, p_test[rows]))
    monitored = service.monitoring(name, start, start + len(windows) * HOUR)
    for window, row in zip(windows, monitored, strict=True):
        window.row = row
        window.reference = realized(window.labels, window.probabilities)

    rate_test = float(y_test.mean())
    to_rates: dict[float, int] = {}  # the versions adjusted to each true rate, made once
    for window, (_, rows, _) in zip(windows, drawn, strict=True):
        if window.kind not in ("up", "down"):
            continue
        rate = window.true_rate
        weights = np.where(y_test == 1, rate / rate_test, (1 - rate) / (1 - rate_test))
        window.estimand = likeliest_prior(p_test, training, weights)
        window.bbse = bbse_prior(p_cal, scored.labels_cal, window.probabilities)
        if plan.adjust:
            _adjusted(service, name, window, scored.scores_test[rows], start, to_rates)
    return Replayed(
        scored.case,
        y_test.size,
        float(roc_auc_score(y_test, p_test)),
        training,
        spiegelhalter_p(p_test, y_test),
        hosmer_lemeshow_p(p_test, y_test),
        windows,
        time.perf_counter() - began,
    )


def _adjusted(
    service: Service,
    name: str,
    window: Window,
    scores: FloatArray,
    start: datetime,
    to_rates: dict[float, int],
) -> None:
    """Version 1 adjusted to the window's true rate (one version per rate, kept in
    ``to_rates``) and to its traffic's EM estimate; the log loss of each, and of version 1,
    on the window."""
    at = start + window.hour * HOUR
    rate = window.true_rate
    if rate not in to_rates:
        to_rates[rate], _ = service.adjust(name, {"prior": rate})
    to_true = to_rates[rate]
    to_traffic, prior = service.adjust(
        name, {"prior": "traffic", "since": at.isoformat(), "until": (at + HOUR).isoformat()}
    )
    window.traffic_prior = prior
    window.log_losses = {"parent": log_loss(window.labels, window.probabilities)}
    for label, version in (("true", to_true), ("traffic", to_traffic)):
        window.adjusted[label] = service.predict(name, version, scores)
        window.log_losses[label] = log_loss(window.labels, window.adjusted[label])


class InProcess:
    """:class:`Service` by :class:`~app.service.use_cases.CalibrationService`'s own methods,
    the ones the routes call, on an SQLite file of its own (:meth:`on_sqlite`)."""

    def __init__(self, service: CalibrationService) -> None:
        self.service = service

    @classmethod
    @contextmanager
    def on_sqlite(cls) -> Iterator[InProcess]:
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{Path(folder) / 'replay.db'}"
            upgrade(url)
            settings = Settings(database_url=url)
            service = CalibrationService(Database(url, settings), settings, worker=True)
            try:
                yield cls(service)
            finally:
                service.close()
                service.database.dispose()

    def fit(self, name: str, scores: FloatArray, labels: FloatArray, method: str) -> None:
        batch = validate_batch(scores, labels, None, max_rows=self.service.settings.max_batch_rows)
        self.service.versions.fit(name, batch, method=method, params={})

    def predict(self, name: str, version: int, scores: FloatArray) -> FloatArray:
        found = self.service.serving.predict(name, version, np.ascontiguousarray(scores))
        return np.asarray(found.probabilities, dtype=np.float64)

    def log(
        self,
        name: str,
        start: datetime,
        scores: FloatArray,
        probabilities: FloatArray,
        labels: FloatArray,
    ) -> None:
        log_traffic(self.service.database, name, start, scores, probabilities, labels)

    def monitoring(self, name: str, since: datetime, until: datetime) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.service.traffic.monitoring(
            name, "1h", since, until, resamples=0
        )
        return rows

    def adjust(self, name: str, body: dict[str, Any]) -> tuple[int, float]:
        prior = body["prior"]
        if prior == "traffic":
            target: GivenPriors | TrafficPriors = TrafficPriors(
                datetime.fromisoformat(body["since"]), datetime.fromisoformat(body["until"])
            )
        else:
            target = GivenPriors((float(prior),), "prior")
        record = self.service.adjustments.adjust(name, 1, target).record
        assert record.source is not None  # an adjusted version says where it came from
        return int(record.version), float(record.source["adjusted"]["prior_to"])
