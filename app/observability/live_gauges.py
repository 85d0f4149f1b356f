"""The live calibration gauges: computed by one process, exported by every one.

:mod:`app.service.traffic.live` computes a :class:`LiveSnapshot` now and then: per calibrator, the
numbers of its traffic's most recent complete window. It publishes the snapshot whole
(:func:`publish_live`), and :class:`LiveCollector` turns the one published into gauges at each
scrape, with the one label ``calibrator``; a calibrator that is not in it has no series.

Not prometheus-client's ``Gauge``: in multiprocess mode its values live in a memory-mapped
file per process, and a series once written there stays. ``remove()`` only warns that it is
"not implemented in multi-process mode", and the file of a process that exited is exported
for as long as the directory lives (``mark_process_dead`` clears ``live*`` gauges only, and
uvicorn never calls it). A calibrator deleted, gone quiet or pushed past the cap would keep
its last numbers for good: neither the bound on the series nor the refusal of stale values
could hold. A snapshot replaced whole gives both.

Where the snapshot lives: in memory in a single process. With several workers
(``PROMETHEUS_MULTIPROC_DIR``, see :mod:`app.server.startup`), in :data:`SNAPSHOT_FILE` in that
directory, written beside it and renamed over it, so a scrape never reads half of one;
whichever worker answers the scrape reads it. Only the worker holding :class:`Leadership`
computes it.

A snapshot expires (``expires_at``): past it, the gauges have no series until a new one is
published, rather than numbers nobody refreshes any more.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

logger = logging.getLogger("app.observability")

SNAPSHOT_FILE = "live_gauges.json"
"""The published snapshot, in the multiprocess directory."""

LOCK_FILE = "live_gauges.lock"
"""The file whose ``flock`` makes a worker the one that computes the snapshot."""

GAUGES: dict[str, tuple[str, str]] = {
    "log_loss": (
        "calibration_live_log_loss",
        "Log loss of the labelled predictions in the calibrator's most recent complete window.",
    ),
    "ece": (
        "calibration_live_ece",
        "Expected calibration error (10 uniform bins) of the labelled predictions in the "
        "calibrator's most recent complete window.",
    ),
    "labelled": (
        "calibration_live_labelled",
        "Predictions with an outcome in the calibrator's most recent complete window.",
    ),
    "psi": (
        "calibration_traffic_psi",
        "Population stability index of the raw scores in the calibrator's most recent "
        "complete window against the version's fitting batch.",
    ),
    "version": (
        "calibration_live_version",
        "The version the calibrator's live gauges describe: the one that answered the most "
        "predictions in the window.",
    ),
}
"""A :class:`LiveValues` field, and the gauge it is exported as."""

PRIOR_GAUGES: tuple[tuple[str, str], ...] = (
    (
        "calibration_live_prior_training",
        "The class prior the calibrator's live version was trained under (binary: class 1's).",
    ),
    (
        "calibration_live_prior_estimated",
        "The class prior of the calibrator's most recent complete window, estimated by EM from "
        "all its predictions, labelled or not (label shift).",
    ),
    ("calibration_live_prior_low", "The lower end of that estimate's 95% interval."),
    ("calibration_live_prior_high", "The upper end of that estimate's 95% interval."),
)
"""The gauges of :attr:`LiveValues.priors`, in the order of each class's four numbers; with
the labels ``calibrator``, ``version`` and ``class``."""

SKIPPED = (
    "calibration_live_skipped_calibrators",
    "Calibrators with traffic in the window left out of the live gauges by "
    "CALIBRATION_LIVE_METRICS_MAX_CALIBRATORS.",
)


@dataclass(frozen=True)
class LiveValues:
    """One calibrator's numbers for the window: None where there are none (no labelled
    predictions: no log loss nor ECE). ``priors``: per class (binary: class ``"1"`` only),
    the training prior, the window's estimate and its interval's ends."""

    version: int
    labelled: int
    log_loss: float | None
    ece: float | None
    psi: float | None
    priors: dict[str, list[float]] | None = None


@dataclass(frozen=True)
class LiveSnapshot:
    """Every exported calibrator's numbers, how many were left out, and until when (seconds
    since the epoch) the numbers may be exported."""

    calibrators: dict[str, LiveValues]
    skipped: int
    expires_at: float


_in_memory: LiveSnapshot | None = None


def publish_live(snapshot: LiveSnapshot) -> None:
    """Make ``snapshot`` the one every scrape exports, replacing the last one whole."""
    global _in_memory
    directory = multiprocess_directory()
    if directory is None:
        _in_memory = snapshot
        return
    document = {
        "calibrators": {name: asdict(values) for name, values in snapshot.calibrators.items()},
        "skipped": snapshot.skipped,
        "expires_at": snapshot.expires_at,
    }
    path = directory / SNAPSHOT_FILE
    written = path.with_name(f".{SNAPSHOT_FILE}.{os.getpid()}")
    written.write_text(json.dumps(document))
    os.replace(written, path)


def published_live(now: float | None = None) -> LiveSnapshot | None:
    """The snapshot published last, unless there is none or it expired by ``now``."""
    directory = multiprocess_directory()
    snapshot = _in_memory if directory is None else _read(directory / SNAPSHOT_FILE)
    if snapshot is None or snapshot.expires_at <= (time.time() if now is None else now):
        return None
    return snapshot


class LiveCollector(Collector):
    """The gauges of the published snapshot, read at each scrape."""

    def describe(self) -> Iterator[Metric]:
        """The gauges' families without samples (the registry checks names with these)."""
        yield from self._families(None)

    def collect(self) -> Iterator[Metric]:
        """The gauges of the snapshot in force: no samples when there is none."""
        yield from self._families(published_live())

    @staticmethod
    def _families(snapshot: LiveSnapshot | None) -> Iterator[Metric]:
        calibrators = {} if snapshot is None else snapshot.calibrators
        for field, (name, documentation) in GAUGES.items():
            family = GaugeMetricFamily(name, documentation, labels=["calibrator"])
            for calibrator, values in sorted(calibrators.items()):
                value = getattr(values, field)
                if value is not None:
                    family.add_metric([calibrator], value)
            yield family
        for i, (name, documentation) in enumerate(PRIOR_GAUGES):
            family = GaugeMetricFamily(
                name, documentation, labels=["calibrator", "version", "class"]
            )
            for calibrator, values in sorted(calibrators.items()):
                for label, numbers in sorted((values.priors or {}).items()):
                    family.add_metric([calibrator, str(values.version), label], numbers[i])
            yield family
        skipped = GaugeMetricFamily(*SKIPPED)
        if snapshot is not None:
            skipped.add_metric([], snapshot.skipped)
        yield skipped


class Leadership:
    """Whether this process is the one that computes the snapshot.

    In a single process it always is. With a multiprocess directory, the first worker to
    take an exclusive ``flock`` on :data:`LOCK_FILE` there is, until it exits or dies (the
    kernel releases the lock then) and another worker takes it at its next try. Without
    this each of N workers would run the same queries for the same numbers.
    """

    def __init__(self) -> None:
        self._held: IO[str] | None = None

    def claim(self) -> bool:
        """Take the lead if it is free; whether this process has it."""
        directory = multiprocess_directory()
        if directory is None or self._held is not None:
            return True
        handle = (directory / LOCK_FILE).open("a")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            return False
        self._held = handle
        return True

    def release(self) -> None:
        """Give the lead up (at shutdown), so another worker may take it at once."""
        if self._held is not None:
            self._held.close()  # closing the file releases its flock
            self._held = None


def multiprocess_directory() -> Path | None:
    """prometheus-client's multiprocess directory, None in single-process mode (the old
    lower-case variable is read too, as prometheus-client still does)."""
    for variable in ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    return None


def _read(path: Path) -> LiveSnapshot | None:
    """The snapshot in ``path``; None when there is none yet, or it cannot be read (logged:
    a scrape must not fail over it)."""
    try:
        document = json.loads(path.read_bytes())
        return LiveSnapshot(
            calibrators={
                name: LiveValues(**values) for name, values in document["calibrators"].items()
            },
            skipped=document["skipped"],
            expires_at=document["expires_at"],
        )
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        logger.warning("the live gauges' snapshot %s cannot be read: %s", path, exc)
        return None
