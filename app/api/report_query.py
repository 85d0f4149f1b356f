"""The query parameters of a reliability report, one definition for every route that takes
them (a version's diagnostics and diagrams, a posted batch's, compare, the traffic's), and the
picture an ``Accept`` header asks for instead of JSON."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query

from app.api.bodies.fields import (
    BINS_TEXT,
    BOOTSTRAP_TEXT,
    CLASS_INDEX_TEXT,
    CURVE_TEXT,
    MAX_CLASS_INDEX,
    STRATEGY_TEXT,
    BinCount,
)
from app.calibration import MAX_BINS, MAX_RESAMPLES, MIN_BINS
from app.service.reporting import DEFAULT_REPORT, Curve, ImageFormat, ReportOptions, Strategy

NBins = Annotated[BinCount, Query(description=BINS_TEXT)]
FixedBins = Annotated[int, Query(ge=MIN_BINS, le=MAX_BINS, description="Number of bins.")]
StrategyQuery = Annotated[Strategy, Query(description=STRATEGY_TEXT)]
ClassIndex = Annotated[int | None, Query(ge=0, le=MAX_CLASS_INDEX, description=CLASS_INDEX_TEXT)]
Resamples = Annotated[int, Query(ge=0, le=MAX_RESAMPLES, description=BOOTSTRAP_TEXT)]
CurveQuery = Annotated[Curve, Query(description=CURVE_TEXT)]
# The same options of a POST, None where not given (a JSON body's own fields win).
GivenBins = Annotated[BinCount | None, Query(description=BINS_TEXT)]
GivenStrategy = Annotated[Strategy | None, Query(description=STRATEGY_TEXT)]
GivenResamples = Annotated[int | None, Query(ge=0, le=MAX_RESAMPLES, description=BOOTSTRAP_TEXT)]
GivenCurve = Annotated[Curve | None, Query(description=CURVE_TEXT)]


def report_query(
    n_bins: NBins = DEFAULT_REPORT.n_bins,
    strategy: StrategyQuery = DEFAULT_REPORT.strategy,
    class_index: ClassIndex = DEFAULT_REPORT.class_index,
    bootstrap: Resamples = DEFAULT_REPORT.bootstrap,
    curve: CurveQuery = DEFAULT_REPORT.curve,
) -> ReportOptions:
    """The report a GET asks for, from its query parameters."""
    return ReportOptions(n_bins, strategy, class_index, bootstrap, curve)


ReportQuery = Annotated[ReportOptions, Depends(report_query)]
MEDIA_TYPES: dict[ImageFormat, str] = {"png": "image/png", "svg": "image/svg+xml"}
"""The media type of each picture format the figures draw."""
IMAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON, or the diagram when Accept asks for image/png or image/svg+xml",
        "content": {"image/png": {}, "image/svg+xml": {}},
    }
}


def wanted_image(accept: str | None) -> ImageFormat | None:
    """The picture format an Accept header prefers over JSON, if any (RFC 9110 12.5.1):
    the highest ``q`` wins, the earlier entry on a tie, and ``q=0`` means "not this"."""
    best: tuple[float, ImageFormat | None] = (0.0, None)
    for part in (accept or "").split(","):
        media, *parameters = (piece.strip().lower() for piece in part.split(";"))
        quality = 1.0
        for parameter in parameters:
            key, _, value = parameter.partition("=")
            if key.strip() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if not 0.0 < quality <= 1.0 or quality <= best[0]:
            continue
        if media in ("image/png", "image/*", "image/svg+xml"):
            best = (quality, "svg" if media == "image/svg+xml" else "png")
        elif media in ("application/json", "*/*", "application/*", "application/problem+json"):
            best = (quality, None)
    return best[1]
