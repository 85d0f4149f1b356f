"""What a reliability report is asked for, and the reports of one labelled batch: shared by
every use case that reports (a stored version's, :mod:`app.service.diagnosis`; a posted
batch's; the logged traffic's, :mod:`app.service.traffic`) and by the routes that parse the
options."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from app.calibration import (
    RESAMPLES,
    BinFree,
    CalibrationError,
    Report,
    raw_as_probabilities,
    reliability_reports,
)
from app.errors import invalid

Strategy = Literal["uniform", "quantile"]
ImageFormat = Literal["png", "svg"]
Curve = Literal["binned", "smooth", "both"]

BinFreeParts = tuple[BinFree, BinFree]
"""What a version's calibrated and raw reports for one ``n_bins`` and ``strategy`` share with
those for any other (same class and resamples): :class:`~app.calibration.BinFree`."""

DEFAULT_BINS = 10
"""The bins of a report that does not say (monitoring's windows, the live metrics)."""


@dataclass(frozen=True)
class ReportOptions:
    """What a reliability report is asked for (the defaults of every route that asks):
    ``n_bins`` may be ``"auto"``; ``bootstrap`` resamples give the intervals (0: none);
    ``curve`` is what a diagram draws (the JSON holds both)."""

    n_bins: int | Literal["auto"] = DEFAULT_BINS
    strategy: Strategy = "uniform"
    class_index: int | None = None
    bootstrap: int = RESAMPLES
    curve: Curve = "binned"

    def reported(self) -> ReportOptions:
        """The options the reports depend on: not ``curve``, which only a picture reads."""
        return replace(self, curve="binned")

    def pictured(self) -> ReportOptions:
        """The reports a picture needs: a binned diagram draws no bootstrap band, so none is
        resampled for it."""
        return replace(self.reported(), bootstrap=0 if self.curve == "binned" else self.bootstrap)


DEFAULT_REPORT = ReportOptions()


def labelled_reports(
    probabilities: NDArray[np.float64],
    scores: NDArray[np.float64],
    labels: NDArray[np.int64],
    weights: NDArray[np.float64] | None,
    query: ReportOptions,
    known: BinFreeParts | None = None,
) -> tuple[Report, Report]:
    """The calibrated and the raw reliability reports of one labelled batch (a stored
    version's, a posted one, the logged traffic's), their intervals from the same resamples
    (``known``: the parts reports of other bins share); errors name the option, wherever the
    request gave it."""
    try:
        calibrated, raw = reliability_reports(
            [probabilities, raw_as_probabilities(scores)],
            labels,
            weights,
            n_bins=query.n_bins,
            strategy=query.strategy,
            class_index=query.class_index,
            resamples=query.bootstrap,
            known=known,
        )
    except CalibrationError as exc:
        raise invalid(exc.loc, exc.reason) from None
    return calibrated, raw
