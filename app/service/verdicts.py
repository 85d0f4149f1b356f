"""Which of two stored versions is better when no batch is uploaded: the web view's verdict.

The compare route ranks versions on a labelled batch its caller sends
(:meth:`~app.service.comparison.Comparison.compare`). The web view has none, so
:meth:`Verdicts.verdict` chooses labelled pairs on which both versions are scored out of
sample, and ranks them with the same code (:func:`~app.service.comparison.ranked`: log loss,
the paired bootstrap interval of the gap, whether it excludes 0):

1. The labelled traffic logged since the newer of the two was created, over the last
   :data:`TRAFFIC_DAYS` days at most, when it holds :data:`MIN_TRAFFIC` labelled predictions
   or more. Neither version was fitted on a prediction logged after it existed (a refit
   reads what was logged before it), and both score the same raw scores. It is read as a
   refit reads it (:func:`~app.service.traffic.refit.traffic_batch`): ``POST …/compare``
   with those pairs answers the same numbers.
2. Otherwise the two fitting batches one after the other, each version scored out of sample
   on every pair: by its out-of-fold predictions on its own batch (stored with it), by its
   calibrator on the other's. A version's calibrator on its own batch would be graded on
   the pairs it was fitted on, which flatters the more flexible method (isotonic regression
   most). A batch both were fitted on is used once, out of fold for both. Pairs common to
   two different batches (a refit over traffic another refit read) are not detected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np

from app.errors import InvalidInput
from app.service.batches import Batch
from app.service.comparison import ranked
from app.service.diagnosis import Diagnosis
from app.service.memo import Memo
from app.service.traffic.gathering import counted
from app.service.traffic.refit import traffic_batch
from app.service.version_cache import VersionCache
from app.store import Database, StoredBatch

TRAFFIC_DAYS = 30
"""How far back the traffic a verdict rests on may go."""
MIN_TRAFFIC = 100
"""The labelled predictions a verdict needs from the traffic; with fewer, the fitting batches."""
BY = "log_loss"
"""What a verdict ranks by: a proper scoring rule, which calibration and sharpness both move."""
VERDICTS_KEPT = 64
"""Verdicts on fitting batches kept (they never change: a version's number is never reused)."""


@dataclass(frozen=True)
class Evidence:
    """What a verdict rests on: ``traffic`` logged in [since, until), or the two versions'
    ``fitting`` batches (``sizes``: the rows of each of ``versions``' batches; ``shared``: one
    batch both were fitted on); ``n_samples`` pairs in all. ``newer`` is the newer version,
    ``labelled`` the labelled predictions logged since it was created (within the window),
    ``skipped`` why the traffic was not used although it had enough, ``weighted_as`` the
    version whose weights a shared batch was read with when theirs differ (an adjusted
    version and its parent)."""

    source: Literal["traffic", "fitting"]
    n_samples: int
    newer: int
    since: datetime
    until: datetime
    labelled: int
    versions: tuple[int, int] = (0, 0)
    sizes: tuple[int, int] = (0, 0)
    shared: bool = False
    skipped: str | None = None
    weighted_as: int | None = None


@dataclass(frozen=True)
class Verdict:
    """The compare document of the two versions (:func:`~app.service.comparison.ranked`, by
    :data:`BY`) and the :class:`Evidence` it rests on."""

    ranked: dict[str, Any]
    evidence: Evidence


class Verdicts:
    """The web view's verdict between two stored versions."""

    def __init__(
        self,
        database: Database,
        versions: VersionCache,
        diagnosis: Diagnosis,
        max_rows: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.database = database
        self.versions = versions
        self.diagnosis = diagnosis
        self.max_rows = max_rows
        self.clock = clock
        self.kept: Memo[Verdict] = Memo(VERDICTS_KEPT)

    def verdict(self, name: str, first: int, second: int, resamples: int) -> Verdict:
        """Versions ``first`` and ``second`` of ``name`` ranked by log loss on the labelled
        traffic since the newer was created, or on their fitting batches (see the module);
        ``resamples`` for the paired bootstrap. 422 when they cannot be scored on the same
        pairs (a binary and a k-class version)."""
        until = self.clock()
        with self.database.transaction() as repo:
            records = [repo.get_version(name, number) for number in (first, second)]
            newer = max(records, key=lambda r: r.created_at)
            since = max(newer.created_at, until - timedelta(days=TRAFFIC_DAYS))
            counts = counted(repo, name, since, until)
        labelled = sum(n for _, n in counts.values())
        found = Evidence("traffic", 0, newer.version, since, until, labelled)
        skipped = None
        if MIN_TRAFFIC <= labelled <= self.max_rows:
            try:
                return self._on_traffic(name, (first, second), found, resamples)
            except InvalidInput as exc:  # k-class and binary rows, or scores a version refuses
                skipped = exc.detail
        elif labelled > self.max_rows:
            skipped = f"{labelled} labelled predictions are more than a batch may hold"
        key = (name, first, second, resamples)
        kept = self.kept.get_or_compute(
            key, lambda: self._on_fitting(name, first, second, found, resamples)
        )
        # made once, perhaps at another time: with the traffic found now
        evidence = replace(
            found,
            source="fitting",
            n_samples=kept.evidence.n_samples,
            versions=kept.evidence.versions,
            sizes=kept.evidence.sizes,
            shared=kept.evidence.shared,
            skipped=skipped,
            weighted_as=kept.evidence.weighted_as,
        )
        return Verdict(kept.ranked, evidence)

    def _on_traffic(
        self, name: str, numbers: tuple[int, int], found: Evidence, resamples: int
    ) -> Verdict:
        read = traffic_batch(
            self.database, name, found.since, found.until, None, max_rows=self.max_rows
        )
        batch = read.batch
        rows, probabilities = [], []
        for number in numbers:
            loaded = self.versions.resolve(name, number)
            rows.append({"version": loaded.version, "method": loaded.method})
            probabilities.append(loaded.checked_predict(batch.scores))
        document = ranked(name, rows, probabilities, batch, BY, resamples)
        return Verdict(document, replace(found, n_samples=batch.n_samples))

    def _on_fitting(
        self, name: str, first: int, second: int, found: Evidence, resamples: int
    ) -> Verdict:
        generation = self.versions.generation(name)
        with self.database.transaction() as repo:
            records = [repo.get_version(name, number) for number in (first, second)]
            loaded = [self.versions.load(r, repo, generation) for r in records]
            stored = [self.diagnosis.fitting_batch(r, repo) for r in records]
        shared = _same(*stored)
        # one copy of a shared batch, weighted as the older version was fitted (an adjusted
        # version's weights are its parent's times the new priors' ratios)
        older = min(range(2), key=lambda i: records[i].created_at)
        parts = stored[older : older + 1] if shared else stored
        reweighted = shared and not np.array_equal(stored[0].weights, stored[1].weights)
        probabilities = []
        for i, version in enumerate(loaded):
            if shared:
                scored = [stored[i].out_of_fold]
            else:
                scored = [
                    part.out_of_fold if j == i else version.checked_predict(part.scores)
                    for j, part in enumerate(stored)
                ]
            probabilities.append(np.concatenate(scored))
        batch = Batch(
            np.concatenate([part.scores for part in parts]),
            np.concatenate([part.labels for part in parts]),
            np.concatenate([part.weights for part in parts]),
        )
        rows = [{"version": v.version, "method": v.method} for v in loaded]
        document = ranked(name, rows, probabilities, batch, BY, resamples)
        sizes = (stored[0].labels.shape[0], stored[1].labels.shape[0])
        evidence = replace(
            found,
            source="fitting",
            n_samples=batch.n_samples,
            versions=(first, second),
            sizes=sizes,
            shared=shared,
            weighted_as=records[older].version if reweighted else None,
        )
        return Verdict(document, evidence)


def _same(first: StoredBatch, second: StoredBatch) -> bool:
    """Whether two fitting batches hold the same pairs in the same order, whatever their
    weights: an adjusted version's is its parent's, reweighted to its new priors."""
    return all(
        np.array_equal(getattr(first, field), getattr(second, field))
        for field in ("scores", "labels")
    )
