"""What a window's probabilities say before its labels come, and what its labels then say: the
``estimated``, ``realized`` and ``prior`` of a monitoring row, kept a chunk at a time.

- ``estimated``: the expected performance of *every* prediction of the window, labelled or
  not, if the version is calibrated (CBPE, :mod:`app.calibration.measures.expected`): the
  linear measures from exact sums (:class:`~app.calibration.BinarySums`), the ROC AUC and its
  band from the probabilities counted in log-odds bins
  (:class:`~app.calibration.ProbabilityBins`);
- ``realized``: the same measures over the labelled predictions, at the same threshold: the
  confusion counts, the ROC AUC from the same bins by label (pairs within a bin counted half),
  and the log loss and Brier score the row has already;
- ``prior``: the version's training prior and the EM estimate of the window's (Saerens et
  al. 2002) with its interval, run on the bins' mean probabilities weighted by their counts.

A k-class window has the expected accuracy, log loss and Brier score from exact sums
(:class:`~app.calibration.ClassSums`), and its priors by EM on a uniform sample of at most
:data:`SAMPLE_ROWS` of its rows (Vitter's algorithm R, seeded), the interval's information
scaled to the window's rows.

A window is summed while its rows are read and summarised (:meth:`BinaryWindow.close`) as
soon as a later window's rows come, so memory holds the window being read, not the range.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.calibration import BinarySums, ClassSums, FloatArray, ProbabilityBins
from app.service.estimates import prior_of

SAMPLE_ROWS = 20_000
"""The rows of a k-class window its priors' EM reads at most."""
SAMPLE_SEED = 20_260_111


class Closed:
    """A window's figures once its rows have all been read: ``estimated`` and ``prior``
    whole, ``realized`` but the measures the row's calibration sums have (:meth:`realized`)."""

    def __init__(
        self, estimated: dict[str, Any], prior: dict[str, Any] | None, realized: dict[str, Any]
    ) -> None:
        self.estimated = estimated
        self.prior = prior
        self.partial = realized

    def realized(self, calibration: dict[str, Any] | None) -> dict[str, Any] | None:
        """The realized measures, given the row's calibration figures (None without labels):
        the observed rate, log loss and Brier score come from those."""
        if calibration is None:
            return None
        rate = calibration["observed_rate"]
        found = {**self.partial, "log_loss": calibration["log_loss"], "brier": calibration["brier"]}
        if "positive_rate" in found:
            found["positive_rate"] = rate
        else:  # k classes: the top label's observed rate is the accuracy
            found["accuracy"] = rate
        return found


class BinaryWindow:
    """One binary version's window at ``threshold``, its version trained under ``training``
    priors (None: a version deleted since, whose window has no prior)."""

    def __init__(self, threshold: float, training: FloatArray | None) -> None:
        self.threshold = threshold
        self.training = training
        self.sums = BinarySums(threshold)
        self.bins = ProbabilityBins()
        self.confusion = np.zeros(4)  # of the labelled: tp, fp, fn, tn

    def add(self, p: FloatArray) -> None:
        """Predictions, labelled or not."""
        self.bins.add(p, self.sums.add(p))

    def add_labelled(self, p: FloatArray, y: FloatArray) -> None:
        """Labelled predictions, y 0 or 1."""
        self.bins.add_labelled(p, y)
        predicted, ones = p > self.threshold, y == 1
        for i, (left, right) in enumerate(
            ((predicted, ones), (predicted, ~ones), (~predicted, ones), (~predicted, ~ones))
        ):
            self.confusion[i] += np.count_nonzero(left & right)

    def close(self) -> Closed:
        auc = self.bins.expected_auc()
        band = None if auc is None else self.bins.expected_auc_band(auc)
        return Closed(self.sums.estimate(auc, band), self.prior(), self._realized())

    def prior(self) -> dict[str, Any] | None:
        """The training prior and the EM estimate of the window's, on the bins' means
        weighted by their counts (:func:`~app.service.estimates.prior_of`); None without
        training priors or predictions."""
        if self.training is None or not self.bins.n:
            return None
        means, counts = self.bins.means()
        return prior_of(means, self.training, counts)

    def _realized(self) -> dict[str, Any]:
        tp, fp, fn, tn = self.confusion.tolist()
        n = tp + fp + fn + tn
        return {
            "positive_rate": None,  # from the row's calibration: its observed rate
            "accuracy": (tp + tn) / n if n else None,
            "precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
            "f1": 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None,
            "roc_auc": self.bins.realized_auc(),
        }


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
            self.sample = np.empty((SAMPLE_ROWS, p.shape[1]))
        positions = self.seen + np.arange(p.shape[0])
        slots = positions.copy()
        full = positions >= SAMPLE_ROWS  # algorithm R: row i replaces a slot w.p. SAMPLE/(i+1)
        slots[full] = self.rng.integers(0, positions[full] + 1)
        kept = slots < SAMPLE_ROWS
        self.sample[slots[kept]] = p[kept]  # a slot drawn twice keeps the later row, as in R
        self.seen += p.shape[0]

    def close(self) -> Closed:
        return Closed(self.sums.estimate(), self.prior(), {})

    def prior(self) -> dict[str, Any] | None:
        """The training priors and the EM estimate of the window's, on the sample, each row
        standing for seen / sampled rows; None without training priors or predictions."""
        if self.training is None or self.sample is None:
            return None
        rows = self.sample[: min(self.seen, SAMPLE_ROWS)]
        return prior_of(rows, self.training, np.full(rows.shape[0], self.seen / rows.shape[0]))
