"""The live calibration gauges' periodic computation, off the scrape.

Every ``CALIBRATION_LIVE_METRICS_SECONDS`` (60 s; 0: never) a thread of its own lists the
live calibrators with traffic in the most recent complete window of
``CALIBRATION_LIVE_METRICS_WINDOW`` (``1h``; windows aligned as the monitoring route's, so
from 11:00 until 12:00 the window is [10:00, 11:00)), at most
``CALIBRATION_LIVE_METRICS_MAX_CALIBRATORS`` of them; computes each one's window with
:meth:`app.service.traffic.cases.TrafficCases.monitoring`, the numbers ``GET …/monitoring`` answers;
and publishes them as one :class:`~app.observability.LiveSnapshot`, which
:mod:`app.observability.live_gauges` exports. A complete window still changes as late
outcomes arrive, hence a computation every period and not once per window; each one reads
the whole window of every calibrator covered, so a ``1d`` or ``7d`` window deserves a longer
period than the default. The scrape only reads what was published: it never waits for the
database.

The choices, and why:

- **One version per calibrator**: the one that answered the most predictions in the window
  (the higher number on a tie), exported as ``calibration_live_version``. A mix of versions
  has no one ECE or PSI (each version has its own bins' contents and its own reference, the
  fitting batch), and a weighted mean of ECEs is the ECE of no model. The most answered
  version is what most of the window's traffic got: a canary with a small share stays out
  (``GET …/monitoring?version=`` has its numbers), and after a switch the next window shows
  the new version.
- **The cap** leaves out the calibrators after the first ones in name order, not the least
  busy: the set of series then does not churn as traffic moves. How many were left out is
  ``calibration_live_skipped_calibrators``, and logged when it changes.
- **No value, no series**: a calibrator without labelled predictions in the window has
  ``calibration_live_labelled`` 0 and no log loss nor ECE series, never a stale number or a
  NaN; one without traffic in it, or deleted, has none at all.
- **Failures** never leave a tick. While the database is unavailable the last snapshot stays
  published, until it expires :data:`STALE_PERIODS` periods after it was computed: an outage
  of a few minutes does not blank the gauges (which would restart the alert rules' ``for``),
  a longer one does not leave numbers that nobody refreshes. A calibrator whose numbers fail
  (deleted meanwhile, or a bug, logged) is left out of that tick.
- **One process computes**: with several workers, the one holding
  :class:`~app.observability.Leadership`. Replicas compute theirs each, the same numbers; the
  example alert rules (``deploy/calibration-alerts.yml``) read them ``max by (calibrator)``.
- **The first tick comes one period after start-up**, not during it: a restart of every
  worker does not query the database all at once.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from app.errors import DatabaseUnavailable, NotFound
from app.observability import Leadership, LiveSnapshot, LiveValues, publish_live
from app.service.reporting import DEFAULT_BINS
from app.service.traffic.cases import TrafficCases
from app.service.traffic.monitoring import WINDOW_SECONDS, Window, window_start
from app.service.use_cases import CalibrationService
from app.settings import Settings
from app.store import Database

logger = logging.getLogger("app.live_metrics")

STALE_PERIODS = 3
"""How many periods a snapshot stays exported when no new one could be computed."""

CLOSE_SECONDS = 10.0
"""How long a shutdown waits for a computation under way."""


class LiveMetrics:
    """The thread that computes and publishes the live gauges every period."""

    def __init__(
        self,
        database: Database,
        cases: TrafficCases,
        *,
        window: Window,
        every_seconds: float,
        max_calibrators: int,
    ) -> None:
        self.database = database
        self.cases = cases
        self.window = window
        self.every_seconds = every_seconds
        self.max_calibrators = max_calibrators
        self.leadership = Leadership()
        self._skipped_logged = 0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="live-metrics", daemon=True)

    def start(self) -> None:
        """Compute every period from one period on, until :meth:`close`."""
        self._thread.start()

    def tick(self, now: datetime | None = None) -> bool:
        """Compute the window complete at ``now`` (default: now) and publish it, if this
        process leads; whether a snapshot was published. Never raises."""
        try:
            if not self.leadership.claim():
                return False
            publish_live(self._snapshot(now or datetime.now(UTC)))
        except DatabaseUnavailable:
            logger.warning("live gauges not computed: the database is unavailable")
            return False
        except Exception:
            logger.exception("live gauges not computed")
            return False
        return True

    def close(self) -> None:
        """Stop computing (at shutdown) and give the lead up."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(CLOSE_SECONDS)
        self.leadership.release()

    def _run(self) -> None:
        while not self._closed.wait(self.every_seconds):
            self.tick()

    def _snapshot(self, now: datetime) -> LiveSnapshot:
        start, end = last_complete_window(now, self.window)
        with self.database.transaction() as repo:
            names, total = repo.calibrators_with_traffic(start, end, self.max_calibrators)
        self._log_skipped(total - len(names))
        calibrators = {}
        for name in names:
            values = self._values(name, start, end)
            if values is not None:
                calibrators[name] = values
        expires_at = time.time() + STALE_PERIODS * self.every_seconds
        return LiveSnapshot(calibrators, total - len(names), expires_at)

    def _values(self, name: str, start: datetime, end: datetime) -> LiveValues | None:
        """``name``'s numbers in [start, end); None when it has none (logged when that is
        not simply a delete since the listing)."""
        try:
            rows = self.cases.monitoring(name, self.window, start, end, n_bins=DEFAULT_BINS)
        except NotFound:
            return None
        except DatabaseUnavailable:
            raise
        except Exception:
            logger.exception("live gauges of %r not computed", name)
            return None
        row = most_answered(rows)
        if row is None:
            return None
        return LiveValues(
            version=row["version"],
            labelled=row["n_labelled"],
            log_loss=row["log_loss"],
            ece=row["ece"],
            psi=row["psi"],
            priors=live_priors(row["prior"]),
        )

    def _log_skipped(self, skipped: int) -> None:
        """Log how many calibrators the cap leaves out, when that changes (not every tick)."""
        if skipped == self._skipped_logged:
            return
        self._skipped_logged = skipped
        if skipped == 0:
            logger.info("live gauges cover every calibrator with traffic again")
            return
        logger.warning(
            "live gauges: %d calibrators with traffic past the first %d (in name order) are "
            "left out; raise CALIBRATION_LIVE_METRICS_MAX_CALIBRATORS to cover them",
            skipped,
            self.max_calibrators,
        )


def last_complete_window(now: datetime, window: Window) -> tuple[datetime, datetime]:
    """The most recent window of width ``window`` that ended by ``now``, aligned on the
    epoch as the monitoring route's windows are."""
    end = window_start(now, window)
    return end - timedelta(seconds=WINDOW_SECONDS[window]), end


def most_answered(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Of one window's rows (one per version), the version's that answered the most
    predictions, the higher version on a tie; None when none answered."""
    answered = [row for row in rows if row["version"] is not None and row["n_predictions"]]
    return max(answered, key=lambda row: (row["n_predictions"], row["version"]), default=None)


PRIOR_CLASSES = 16
"""The most classes a calibrator's prior gauges are exported for: four series a class."""


def live_priors(prior: dict[str, Any] | None) -> dict[str, list[float]] | None:
    """A window's ``prior`` as the live gauges export it: per class, [training, estimated,
    low, high]; a binary version's class 1 only. None without an estimate and its interval,
    or past :data:`PRIOR_CLASSES` classes (the series would outnumber what a dashboard
    reads; ``GET …/monitoring`` has them)."""
    if prior is None or prior["estimated"] is None or prior["interval"] is None:
        return None
    if not isinstance(prior["training"], list):  # binary: the positive class's
        return {"1": [prior["training"], prior["estimated"], *prior["interval"]]}
    if len(prior["training"]) > PRIOR_CLASSES:
        return None
    return {
        str(c): [training, estimated, *interval]
        for c, (training, estimated, interval) in enumerate(
            zip(prior["training"], prior["estimated"], prior["interval"], strict=True)
        )
    }


def start_live_metrics(service: CalibrationService, settings: Settings) -> LiveMetrics | None:
    """The service's live gauges, started; None when ``CALIBRATION_LIVE_METRICS_SECONDS``
    is 0."""
    if settings.live_metrics_seconds == 0:
        return None
    live = LiveMetrics(
        service.database,
        service.traffic,
        window=settings.live_metrics_window,
        every_seconds=settings.live_metrics_seconds,
        max_calibrators=settings.live_metrics_max_calibrators,
    )
    live.start()
    return live
