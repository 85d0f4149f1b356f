"""What a window's probabilities say before its labels come, and what its labels then say: the
``estimated``, ``realized`` and ``prior`` of a monitoring row, kept a chunk at a time.

- ``estimated``: the expected performance of *every* prediction of the window, labelled or
  not, if the version is calibrated (CBPE, :mod:`app.calibration.measures.expected`), from
  the window's :class:`~app.calibration.BinaryRollup` (:func:`~app.calibration.expected_of`):
  the linear measures from its sums, the ROC AUC and its band from its cells;
- ``realized``: the same measures over the labelled predictions, at the same threshold: the
  confusion counts, the ROC AUC from the same cells by label (pairs within a cell counted
  half), and the log loss and Brier score the row has already;
- ``prior``: the version's training prior and the EM estimate of the window's (Saerens et
  al. 2002) with its interval, run on the cells' mean probabilities weighted by their counts.

A k-class window has the expected accuracy, log loss and Brier score from exact sums
(:class:`~app.calibration.ClassSums`), and its priors by EM on a uniform sample of at most
:data:`SAMPLE_ROWS` of its rows (Vitter's algorithm R, seeded; fewer when k is large: at most
:data:`SAMPLE_ENTRIES` numbers). The interval is the sample's: the estimate rests on the
sample alone, so its error is the sample's, however many rows the window holds.

A k-class window is summed while its rows are read and summarised (:meth:`ClassWindow.close`,
into a :class:`WindowExpectations`) as soon as a later window's rows come, so memory holds
the sample of the window being read, not the range.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.calibration import (
    BinaryRollup,
    ClassSums,
    FloatArray,
    cell_means,
    confusion_of,
    expected_of,
)
from app.service.estimates import prior_of

SAMPLE_ROWS = 20_000
"""The rows of a k-class window its priors' EM reads at most."""
SAMPLE_ENTRIES = 2_000_000
"""The numbers (rows times classes) that sample holds at most: 16 MB."""
SAMPLE_SEED = 20_260_111


class WindowExpectations:
    """A window's expectations once its rows have all been read: ``estimated`` and ``prior``
    whole, and the realized measures the calibration sums do not have (:meth:`realized`
    completes them)."""

    def __init__(
        self,
        estimated: dict[str, Any],
        prior: dict[str, Any] | None,
        confusion: dict[str, Any],
        *,
        binary: bool,
    ) -> None:
        self.estimated = estimated
        self.prior = prior
        self.confusion = confusion
        self.binary = binary

    def realized(self, calibration: dict[str, Any] | None) -> dict[str, Any] | None:
        """The realized measures, given the window's calibration figures
        (:meth:`~app.service.traffic.sums.CalibrationSums.result`; None without labels): the
        observed rate (binary: the positive rate; k classes: the top label's, the accuracy),
        log loss and Brier score come from those."""
        if calibration is None:
            return None
        rate = "positive_rate" if self.binary else "accuracy"
        return {
            **self.confusion,
            rate: calibration["observed_rate"],
            "log_loss": calibration["log_loss"],
            "brier": calibration["brier"],
        }


def binary_expectations(
    rollup: BinaryRollup, threshold: float, training: FloatArray | None
) -> WindowExpectations | None:
    """A binary version's window at ``threshold`` from its rollup, the version trained
    under ``training`` priors (None: a version deleted since, whose window has no prior);
    None without predictions."""
    if not rollup.n:
        return None
    prior = None
    if training is not None:
        means, counts = cell_means(rollup)
        prior = prior_of(means, training, counts)
    return WindowExpectations(
        expected_of(rollup, threshold), prior, confusion_of(rollup, threshold), binary=True
    )


class ClassWindow:
    """One k-class version's window, its version trained under ``training`` priors."""

    def __init__(self, training: FloatArray | None) -> None:
        self.training = training
        self.sums = ClassSums()
        self.sample: FloatArray | None = None
        self.seen = 0
        self.rng = np.random.default_rng(SAMPLE_SEED)

    def add(self, p: FloatArray) -> None:
        """Predictions (rows of probabilities), labelled or not."""
        self.sums.add(p)
        if self.sample is None:
            size = max(1, min(SAMPLE_ROWS, SAMPLE_ENTRIES // p.shape[1]))
            self.sample = np.empty((size, p.shape[1]))
        size = self.sample.shape[0]
        positions = self.seen + np.arange(p.shape[0])
        slots = positions.copy()
        full = positions >= size  # algorithm R: row i replaces a slot with chance size/(i+1)
        slots[full] = self.rng.integers(0, positions[full] + 1)
        kept = slots < size
        self.sample[slots[kept]] = p[kept]  # a slot drawn twice keeps the later row, as in R
        self.seen += p.shape[0]

    def close(self) -> WindowExpectations:
        """The window's expectations, once its rows have all been added."""
        return WindowExpectations(self.sums.estimate(), self.prior(), {}, binary=False)

    def prior(self) -> dict[str, Any] | None:
        """The training priors and the EM estimate of the window's, on the sample, with the
        sample's interval; None without training priors or predictions."""
        if self.training is None or self.sample is None:
            return None
        return prior_of(self.sample[: min(self.seen, self.sample.shape[0])], self.training)
