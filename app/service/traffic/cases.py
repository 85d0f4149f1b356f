"""The use cases of the traffic loop: outcomes posted by id, live monitoring (as rows, or as
rows and their figure), and the diagnostics of the labelled traffic of a range."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app import figures
from app.calibration import DEFAULT_THRESHOLD, Report, ScoreReference, cell_means
from app.errors import Conflict, NotFound, invalid
from app.service.adjusted import adjusted_to
from app.service.diagnosis import Diagnosis
from app.service.estimates import prior_of, version_priors
from app.service.reporting import DEFAULT_REPORT, ImageFormat, ReportOptions, labelled_reports
from app.service.traffic.expectations import class_expectations
from app.service.traffic.gathering import answered, gather
from app.service.traffic.monitoring import (
    MAX_WINDOWS,
    WINDOW_SECONDS,
    Monitor,
    Window,
    in_utc,
    window_start,
)
from app.store import Database, MixedClasses, OutcomeCounts, Repository, Selector


@dataclass(frozen=True)
class Monitored:
    """What a monitoring read is asked for: the windows of a range (checked, UTC), of one
    version or of all, with ``n_bins`` bins and ``bootstrap`` resamples."""

    window: Window
    since: datetime
    until: datetime
    version: str | None
    n_bins: int
    bootstrap: int = 0
    threshold: float = DEFAULT_THRESHOLD


@dataclass(frozen=True)
class MonitoringFigure:
    """The monitoring rows of a range (:meth:`TrafficCases.monitoring`) and their figure."""

    rows: list[dict[str, Any]]
    picture: bytes


@dataclass(frozen=True)
class TrafficDiagnostics:
    """The reliability reports of the labelled predictions logged in a range: of one
    ``version``, or of every version's (None)."""

    version: int | None
    n_labelled: int
    calibrated: Report
    raw: Report


class TrafficCases:
    """Outcomes and monitoring of a calibrator's logged traffic, one transaction each."""

    def __init__(self, database: Database, diagnosis: Diagnosis, max_rows: int) -> None:
        self.database = database
        self.diagnosis = diagnosis
        self.max_rows = max_rows  # the most labelled predictions a diagnostics reads

    def record(
        self, name: str, outcomes: Sequence[tuple[str, int]], *, overwrite: bool = False
    ) -> OutcomeCounts:
        """Label the predictions of ``name`` logged under these ids; an id not logged yet
        (or still in the buffer) waits, and is joined when its prediction is written."""
        with self.database.transaction(write=True) as repo:
            return repo.record_outcomes(name, outcomes, datetime.now(UTC), overwrite=overwrite)

    def monitoring(
        self,
        name: str,
        window: Window,
        since: datetime,
        until: datetime,
        selector: Selector | None = None,
        *,
        n_bins: int = 10,
        resamples: int = 0,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> list[dict[str, Any]]:
        """Live calibration of ``name``'s logged traffic per window and version
        (:mod:`app.service.traffic.monitoring`), and its expectations at ``threshold``
        (:mod:`app.service.traffic.expectations`); with ``selector``, of that version's traffic
        only.
        Read in one snapshot (:mod:`app.service.traffic.gathering`): the versions that
        answered and what they were fitted on, then the stored hours and the rows the hours
        do not cover, in time order. The versions come first because nothing else can be read
        once the rows stream: PostgreSQL's connection is busy with the ``COPY``."""
        with self.database.transaction() as repo:
            repo.latest_version_number(name)  # 404 for a calibrator that does not exist
            version = None if selector is None else repo.get_version(name, selector).version
            monitor = Monitor(
                since,
                until,
                window,
                {},
                threshold=threshold,
                version=version,
                n_bins=n_bins,
                resamples=resamples,
            )
            versions = answered(monitor, repo, name, version)
            monitor.references, monitor.priors = self._baselines(repo, name, versions)
            gather(monitor, repo, name, version)
        return monitor.rows()

    def prior_estimate(
        self, name: str, version: int, since: datetime, until: datetime
    ) -> dict[str, Any]:
        """The EM estimate of the class priors of ``version``'s logged predictions in
        [since, until), as a monitoring window's (:mod:`app.service.traffic.expectations`):
        ``{"estimated": k-vector, "interval": [low, high] per class, "n_predictions"}``, the
        estimate and interval None without predictions."""
        with self.database.transaction() as repo:
            record = repo.get_version(name, version)
            training = version_priors(record, self.diagnosis.fitting_batch(record, repo))
            monitor = Monitor(since, until, None, {}, version=version)  # summed as a window
            gather(monitor, repo, name, version)
        summed = monitor.sums.get((0, version))
        n = 0 if summed is None else summed.n_predictions
        prior = None
        if summed is not None and summed.rollup is not None and n:
            means, counts = cell_means(summed.rollup)
            prior = prior_of(means, training, counts)
        elif summed is not None and summed.classes is not None and n:
            prior = class_expectations(summed.classes, training).prior
        if prior is None or prior["estimated"] is None:
            return {"estimated": None, "interval": None, "n_predictions": n}
        if record.n_classes == 2:  # class 1's: as the two-class vectors
            (low, high), estimated = prior["interval"], prior["estimated"]
            return {
                "estimated": [1.0 - estimated, estimated],
                "interval": [[1.0 - high, 1.0 - low], [low, high]],
                "n_predictions": n,
            }
        return {"estimated": prior["estimated"], "interval": prior["interval"], "n_predictions": n}

    def _baselines(
        self, repo: Repository, name: str, versions: Iterable[int]
    ) -> tuple[dict[int, ScoreReference], dict[int, NDArray[np.float64]]]:
        """What ``versions`` were fitted on: the binary ones' score bins (stored with them),
        and every one's training priors (a k-class one's from its fitting batch); neither for
        a version deleted since it answered."""
        versions = list(versions)
        stored = repo.score_references(name, versions)
        references: dict[int, ScoreReference] = {}
        priors: dict[int, NDArray[np.float64]] = {}
        for v in versions:
            try:
                record = repo.get_version(name, v)
            except NotFound:
                continue
            reference = stored.get(v)
            if reference is None:  # k-class, or binary with no bins stored: from the batch
                batch = self.diagnosis.fitting_batch(record, repo)
                priors[v] = version_priors(record, batch)
                if record.n_classes == 2:
                    references[v] = ScoreReference.of_batch(
                        np.asarray(batch.scores), batch.labels, np.asarray(batch.weights)
                    )
                continue
            references[v] = reference
            adjusted = adjusted_to(record)
            priors[v] = reference.priors if adjusted is None else adjusted
        return references, priors

    def monitoring_figure(
        self,
        name: str,
        window: Window,
        since: datetime,
        until: datetime,
        selector: Selector | None,
        image_format: ImageFormat,
        *,
        n_bins: int = 10,
        threshold: float = DEFAULT_THRESHOLD,
    ) -> MonitoringFigure:
        """The rows of :meth:`monitoring` and their figure over time
        (:mod:`app.figures.monitoring`), titled with what they are, from one read of the
        traffic; live data, so drawn for each request."""
        rows = self.monitoring(
            name, window, since, until, selector, n_bins=n_bins, threshold=threshold
        )
        title = f"{name} · {window} windows · {since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} UTC"
        if selector is not None:
            title += f" · version {selector}"
        picture = figures.render_monitoring(rows, title=title, image_format=image_format)
        return MonitoringFigure(rows, picture)

    def diagnostics(
        self,
        name: str,
        since: datetime,
        until: datetime,
        selector: Selector | None = None,
        query: ReportOptions = DEFAULT_REPORT,
    ) -> TrafficDiagnostics:
        """The reliability reports of ``name``'s labelled predictions logged in [since, until)
        (:func:`app.service.reporting.labelled_reports`, as for a stored version or a posted batch):
        the probabilities answered, and the raw scores scaled (binary) or as probabilities
        (k-class: top-label, or ``class_index``). 404 when there is no labelled traffic, 409
        when it mixes binary and k-class versions or k-class ones of different k (choose
        one with ``version``), 413 when it holds more labelled predictions than a batch may."""
        with self.database.transaction() as repo:
            repo.latest_version_number(name)  # 404 for a calibrator that does not exist
            version = None if selector is None else repo.get_version(name, selector).version
            columns = repo.labelled_columns(name, since, until, version, max_rows=self.max_rows)
            _, versions, scores, probabilities, labels = columns.T
            k_class = ~np.isfinite(probabilities)  # k-class rows have no single probability
            if k_class.any() and not k_class.all():
                raise Conflict(
                    f"the labelled traffic of {name!r} mixes binary versions "
                    f"({_listed(versions[~k_class])}) and k-class ones "
                    f"({_listed(versions[k_class])}): choose one with `version`"
                )
            if k_class.any():
                try:
                    scores, probabilities, y = repo.labelled_class_rows(name, since, until, version)
                except MixedClasses as exc:
                    raise Conflict(str(exc)) from None
                known = y < probabilities.shape[1]  # a label past k - 1 is no outcome of these
            else:
                y = labels.astype(np.int64)
                known = y <= 1  # as monitoring does: a label past 1 is no binary outcome
        if not known.any():
            raise NotFound(
                f"{name!r} has no labelled traffic in [{since.isoformat()}, {until.isoformat()})"
                + ("" if version is None else f" of v{version}")
            )
        calibrated, raw = labelled_reports(
            probabilities[known], scores[known], y[known], None, query
        )
        return TrafficDiagnostics(version, int(known.sum()), calibrated, raw)


def monitored_range(
    window: Window, since: datetime | None, until: datetime | None
) -> tuple[datetime, datetime]:
    """The monitored range: UTC, whole windows back from now by default, at most
    :data:`MAX_WINDOWS` windows."""
    width = WINDOW_SECONDS[window]
    if until is None:  # the end of the current window
        until = window_start(datetime.now(UTC), window) + timedelta(seconds=width)
    until = in_utc(until, ("until",))
    since = until - timedelta(seconds=30 * width) if since is None else in_utc(since, ("since",))
    if since >= until:
        raise invalid(("since",), "must be before until")
    if (until - since).total_seconds() > MAX_WINDOWS * width:
        raise invalid(("since",), f"spans more than {MAX_WINDOWS} windows of {window}")
    return since, until


def _listed(versions: NDArray[np.float64]) -> str:
    """The distinct versions, as "v1, v3"."""
    return ", ".join(f"v{int(v)}" for v in np.unique(versions))
