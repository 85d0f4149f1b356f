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
(:class:`~app.calibration.ClassSums`), and its priors by EM on its hours' samples: each
hour keeps the rows whose ids hash lowest, at most
:func:`~app.calibration.measures.class_rollups.sample_size` of them (1,024 for three
classes, fewer past three), each standing for its hour's rows over its sample's
(:class:`~app.calibration.ClassRollup`). The interval is the samples': the estimate rests on
them alone, so its error is theirs, however many rows the window holds; with fewer than
:data:`PRIOR_ROWS_PER_CLASS` sampled rows a class there is no estimate.
"""

from __future__ import annotations

from typing import Any

from app.calibration import (
    BinaryRollup,
    ClassRollup,
    FloatArray,
    cell_means,
    confusion_of,
    expected_of,
)
from app.service.estimates import prior_of

PRIOR_ROWS_PER_CLASS = 10
"""The sampled rows per class a k-class window's prior needs: with fewer (an hour of many
classes), EM's estimate is further from the truth than the training prior, and no estimate
is given."""


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


def class_expectations(rollup: ClassRollup, training: FloatArray | None) -> WindowExpectations:
    """A k-class version's window from its rollup, the version trained under ``training``
    priors (None: deleted since, no prior): the expected measures from the exact sums, and
    the priors by EM on the hours' samples, each row weighted by its hour's rows over its
    sample's (:meth:`~app.calibration.ClassRollup.sample`)."""
    prior = None
    rows, weights = rollup.sample()
    if training is not None:
        enough = rows.shape[0] >= PRIOR_ROWS_PER_CLASS * rollup.k
        prior = prior_of(rows if enough else rows[:0], training, weights, sampled=True)
    return WindowExpectations(rollup.expected.estimate(), prior, {}, binary=False)
