"""The integrated calibration index (Austin & Steyerberg, "The Integrated Calibration Index
(ICI) and related metrics for quantifying the calibration of logistic regression models",
Statistics in Medicine, 2019).

The observed frequency of positives at each p is estimated by a LOWESS of the labels on p
(span 0.75, local linear, no robustness iterations: :mod:`app.calibration.measures.lowess`, equal to
statsmodels' ``lowess(y, p, frac=0.75, it=0, delta=0)``); the ICI is the weighted mean over
the rows of |p - smoothed|, and E50, E90 and Emax are the median, 90th percentile and maximum
of the same distances. Austin & Steyerberg smooth with R's ``loess`` (span 0.75 too, but local
quadratic); docs/methods.md asks for a LOWESS, and statsmodels' is the reference here, so the
smooth is local linear. Like theirs, it is not clipped to [0, 1].
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from app.calibration.base import FloatArray
from app.calibration.measures.lowess import sorted_rows
from app.calibration.measures.lowess_rows import fitted


class Ici(NamedTuple):
    ici: float
    e50: float
    e90: float
    emax: float


def ici(p: FloatArray, y: FloatArray, w: FloatArray | None = None) -> Ici | None:
    """The ICI and its quantiles for probabilities ``p``, 0/1 labels ``y`` and frequency
    weights ``w`` (checked by the caller); None when the LOWESS is undefined (fewer than three
    rows of positive weight, or a single distinct p)."""
    rows = sorted_rows(p, y, w)
    if rows is None:
        return None
    distance = fitted(rows)
    distance -= rows.p
    np.abs(distance, out=distance)
    e50, e90 = _weighted_quantiles(distance, rows.w, (0.5, 0.9))
    # equal weights are a broadcast 1, which a dot product would copy out whole
    total = distance.sum() if rows.unit else np.dot(distance, rows.w)
    return Ici(float(total / rows.cum[-1]), e50, e90, float(distance.max()))


def _weighted_quantiles(
    values: FloatArray, weights: FloatArray, levels: tuple[float, ...]
) -> list[float]:
    """The quantiles of ``values``: R's and numpy's default (type 7, linear) when the weights
    are equal, as Austin & Steyerberg compute E50 and E90; else the weighted inverted CDF,
    which is numpy's ``inverted_cdf`` of the rows replicated by their (integer) weights."""
    if weights.min() == weights.max():
        return [float(q) for q in np.quantile(values, levels)]
    order = np.argsort(values)
    cum = np.cumsum(weights[order])  # numpy's weighted quantile makes twice the copies
    at = np.searchsorted(cum, np.asarray(levels) * cum[-1], side="left")
    return [float(values[order[min(i, values.size - 1)]]) for i in at]
