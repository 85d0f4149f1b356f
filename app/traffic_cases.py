"""The use cases of the traffic loop: outcomes posted by id, and live monitoring (as rows or as
a figure)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from numpy.typing import NDArray

from app.diagnosis import Diagnosis, ImageFormat
from app.monitoring import Traffic, Window, windows
from app.monitoring_diagram import render_monitoring
from app.store import Database, Selector
from app.store.traffic import OutcomeCounts


class TrafficCases:
    """Outcomes and monitoring of a calibrator's logged traffic, one transaction each."""

    def __init__(self, database: Database, diagnosis: Diagnosis) -> None:
        self.database = database
        self.diagnosis = diagnosis

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
    ) -> list[dict[str, Any]]:
        """Live calibration of ``name``'s logged traffic per window and version
        (:mod:`app.monitoring`); with ``selector``, of that version's traffic only."""
        with self.database.transaction() as repo:
            repo.latest_version_number(name)  # 404 for a calibrator that does not exist
            version = None if selector is None else repo.get_version(name, selector).version
            columns = repo.traffic_columns(name, since, until, version)
        seconds, versions, scores, probabilities, labels = columns.T
        traffic = Traffic(
            seconds=seconds,
            versions=versions.astype(np.int64),
            scores=scores,
            probabilities=probabilities,
            labels=labels.astype(np.int64),
        )

        def reference(v: int) -> NDArray[np.float64]:
            return self.diagnosis.fitting_scores(name, v)

        return windows(traffic, since, until, window, reference, version=version, n_bins=n_bins)

    def monitoring_picture(
        self,
        name: str,
        window: Window,
        since: datetime,
        until: datetime,
        selector: Selector | None,
        image_format: ImageFormat,
        *,
        n_bins: int = 10,
    ) -> bytes:
        """The rows of :meth:`monitoring` drawn over time (:mod:`app.monitoring_diagram`);
        live data, so drawn for each request."""
        rows = self.monitoring(name, window, since, until, selector, n_bins=n_bins)
        title = f"{name} · {window} windows · {since:%Y-%m-%d %H:%M} to {until:%Y-%m-%d %H:%M} UTC"
        if selector is not None:
            title += f" · version {selector}"
        return render_monitoring(rows, title=title, image_format=image_format)
