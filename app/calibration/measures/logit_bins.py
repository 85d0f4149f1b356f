"""Probabilities counted in fine bins of their log odds: what a window of traffic keeps of its
probabilities for the measures that need more than sums.

The expected ROC AUC, its sampling band and the label-shift EM need every probability of a
window (:mod:`~app.calibration.measures.expected`, :mod:`~app.calibration.measures.label_shift`);
an hour of busy traffic is tens of millions of rows. Counted in :data:`LOGIT_BINS` bins of
equal width in log odds over [-:data:`LOGIT_LIMIT`, :data:`LOGIT_LIMIT`] (a probability within
1.1e-7 of 0 or 1 joins an end bin), with each bin's sums of p and p (1 - p), they take the same
80 KB whatever the traffic, and add up chunk by chunk and window by window. Log odds rather than p
keep a fraud model's 0.001 apart from its 0.002 as well as 0.5 from 0.501.

What binning changes, and by how much:

- the AUC counts pairs within one bin half, as for tied scores, instead of by their order:
  off by at most half the share of (positive, negative) pairs that fall in one bin
  (:meth:`ProbabilityBins.auc_slack`; about 1e-4 for a model whose probabilities spread
  over a few hundred bins);
- EM reads each bin as its rows' mean probability: the posteriors move by a second-order
  term in the bin's width (1/64 in log odds).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from app.calibration.base import FloatArray
from app.calibration.measures.expected import EPS, Band, grouped_auc, grouped_auc_band

LOGIT_BINS = 2048
LOGIT_LIMIT = 16.0


def logit_bin(p: FloatArray, log_odds: FloatArray | None = None) -> NDArray[np.intp]:
    """The bin of each probability (given its ``log_odds`` as
    :meth:`~app.calibration.measures.expected.BinarySums.add` answers them, or not): monotone
    in p."""
    if log_odds is None:
        clipped = np.clip(p, EPS, 1 - EPS)
        log_odds = np.log(clipped) - np.log1p(-clipped)
    z = log_odds
    scaled = np.floor((z + LOGIT_LIMIT) * (LOGIT_BINS / (2 * LOGIT_LIMIT)))
    return np.clip(scaled, 0, LOGIT_BINS - 1).astype(np.intp)


class ProbabilityBins:
    """Counts and sums of probabilities per log-odds bin: of every prediction (``counts``,
    ``sums`` of p and ``spreads``, sums of p (1 - p): the expected AUC and its band, EM),
    and of the labelled ones by label (``positives``, ``negatives``: the realized AUC)."""

    def __init__(self) -> None:
        self.counts = np.zeros(LOGIT_BINS, dtype=np.int64)
        self.sums = np.zeros(LOGIT_BINS)
        self.spreads = np.zeros(LOGIT_BINS)
        self.positives = np.zeros(LOGIT_BINS, dtype=np.int64)
        self.negatives = np.zeros(LOGIT_BINS, dtype=np.int64)

    def add(self, p: FloatArray, log_odds: FloatArray | None = None) -> None:
        """Predictions, labelled or not (and their log odds, if known)."""
        which = logit_bin(p, log_odds)
        self.counts += np.bincount(which, minlength=LOGIT_BINS)
        self.sums += np.bincount(which, p, minlength=LOGIT_BINS)
        self.spreads += np.bincount(which, p * (1.0 - p), minlength=LOGIT_BINS)

    def add_labelled(self, p: FloatArray, y: FloatArray) -> None:
        """Labelled predictions (y 0 or 1)."""
        which = logit_bin(p)
        ones = y == 1
        self.positives += np.bincount(which[ones], minlength=LOGIT_BINS)
        self.negatives += np.bincount(which[~ones], minlength=LOGIT_BINS)

    def expected_auc(self) -> float | None:
        """The area under the expected ROC curve: per bin, sum p expected positives and
        sum (1 - p) expected negatives."""
        return grouped_auc(self.sums, self.counts - self.sums)

    def expected_auc_band(self, auc: float) -> Band:
        """The 95% band of the realized AUC around the expected ``auc``
        (:func:`~app.calibration.measures.expected.grouped_auc_band`, bins as groups)."""
        return grouped_auc_band(self.sums, self.counts - self.sums, self.spreads, auc)

    def realized_auc(self) -> float | None:
        """The ROC AUC of the labelled predictions, pairs within a bin counted half."""
        return grouped_auc(self.positives, self.negatives)

    def auc_slack(self) -> float | None:
        """The most binning can move :meth:`realized_auc` from the AUC of the rows
        themselves: half the share of (positive, negative) pairs within one bin."""
        pairs = float(self.positives.sum()) * float(self.negatives.sum())
        if pairs == 0:
            return None
        return 0.5 * float(self.positives @ self.negatives.astype(np.float64)) / pairs

    def means(self) -> tuple[FloatArray, FloatArray]:
        """The filled bins' mean probabilities, and their counts (as weights)."""
        filled = self.counts > 0
        counts = self.counts[filled].astype(np.float64)
        return self.sums[filled] / counts, counts

    @property
    def n(self) -> int:
        return int(self.counts.sum())
