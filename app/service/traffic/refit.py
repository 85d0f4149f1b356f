"""Fits from traffic: the logged predictions that have outcomes, as the next version's batch.

The batch is what the versions in service saw and what happened afterwards: the raw scores
logged with ``predict`` and ``ids``, labelled through ``POST …/outcomes``. It is read without
a Python object per row (:meth:`app.store.traffic.reads.TrafficReads.labelled_traffic`), and
the version fitted on it records its lineage in ``source``: the range and version filter
asked for (``traffic``), the pairs fitted on (``n_samples``), the calibrator's latest
version at the time (``parent_version``) and the range's counts by version. ``compare`` and
the aliases then finish the loop (docs/traffic.md, "The whole loop").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from app.errors import invalid
from app.service.batches import Batch, validate_batch
from app.service.traffic.monitoring import in_utc
from app.store import Database, Selector

FIELD = ("from_traffic",)


@dataclass(frozen=True)
class TrafficBatch:
    """A batch read from the traffic, and the lineage its version will record."""

    batch: Batch
    source: dict[str, Any]


def traffic_batch(
    database: Database,
    name: str,
    since: datetime | None,
    until: datetime | None,
    selector: Selector | None,
    *,
    max_rows: int,
) -> TrafficBatch:
    """The labelled traffic of ``name`` in [since, until) (default: all of it, up to now),
    of the version ``selector`` denotes or of every version, as a batch; 404 for a calibrator
    that does not exist, 422 when the range holds no labelled prediction."""
    until = datetime.now(UTC) if until is None else in_utc(until, (*FIELD, "until"))
    since = None if since is None else in_utc(since, (*FIELD, "since"))
    if since is not None and since >= until:
        raise invalid((*FIELD, "since"), "must be before until")
    with database.transaction() as repo:
        parent = repo.latest_version_number(name)
        version = None if selector is None else repo.get_version(name, selector).version
        traffic = repo.labelled_traffic(name, since, until, version, max_rows=max_rows)
    binary, rows = traffic.scores.size > 0, traffic.row_labels.size > 0
    if binary and rows:
        raise invalid(
            (*FIELD, "version"), "the traffic mixes binary and k-class versions; choose one"
        )
    if not binary and not rows:
        logged = sum(n for n, _ in traffic.counts.values())
        raise invalid(FIELD, f"no labelled prediction in the range ({logged} logged)")
    scores, labels = (
        (traffic.scores, traffic.labels) if binary else (traffic.score_rows, traffic.row_labels)
    )
    _check_labels(labels, 2 if binary else scores.shape[1])
    batch = validate_batch(scores, labels, None, max_rows=max_rows)
    source = {
        "traffic": {"since": since, "until": until, "version": version},
        "n_samples": batch.n_samples,
        "parent_version": parent,
        "n_predictions": sum(n for n, _ in traffic.counts.values()),
        "versions": {
            str(v): {"n_predictions": n, "n_labelled": labelled}
            for v, (n, labelled) in traffic.counts.items()
        },
    }
    return TrafficBatch(batch, source)


def _check_labels(labels: np.ndarray[Any, Any], k: int) -> None:
    """Outcomes are stored as posted; the batch can only hold the classes 0..k-1."""
    wrong = labels[(labels < 0) | (labels >= k)]
    if wrong.size:
        raise invalid(
            FIELD,
            f"{wrong.size} outcomes have a label outside 0..{k - 1} (e.g. {int(wrong[0])}); "
            "post them again with ?overwrite=true",
        )
