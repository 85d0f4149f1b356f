"""The query of the monitoring routes (JSON, CSV, pictures) and the rows it asks for."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Annotated, Any

from fastapi import Depends, Query, Request

from app.api.deps import off_loop, parse_selector
from app.api.query_params import WindowThreshold
from app.api.report_query import FixedBins, Resamples
from app.calibration import DEFAULT_THRESHOLD, RESAMPLES
from app.service.reporting import DEFAULT_BINS
from app.service.traffic.cases import Monitored, monitored_range
from app.service.traffic.monitoring import Window
from app.service.use_cases import CalibrationService
from app.store import Selector

VersionFilter = Annotated[
    str | None, Query(description="Only the traffic this version (number or alias) answered.")
]


def windows_query(
    window: Annotated[Window, Query(description="Width of each window.")] = "1d",
    since: Annotated[
        datetime | None, Query(description="Start (ISO 8601; default: 30 windows back).")
    ] = None,
    until: Annotated[
        datetime | None, Query(description="End, exclusive (default: the current window's).")
    ] = None,
    version: VersionFilter = None,
    n_bins: FixedBins = DEFAULT_BINS,
    threshold: WindowThreshold = DEFAULT_THRESHOLD,
) -> Monitored:
    """The windows asked for: the pictures' whole query (they draw no intervals), and the
    JSON monitoring's but ``bootstrap``."""
    start, end = monitored_range(window, since, until)
    return Monitored(window, start, end, version, n_bins, threshold=threshold)


WindowsQuery = Annotated[Monitored, Depends(windows_query)]


def monitoring_query(windows: WindowsQuery, bootstrap: Resamples = RESAMPLES) -> Monitored:
    """The query parameters of the monitoring JSON: the pictures' and ``bootstrap``."""
    return replace(windows, bootstrap=bootstrap)


MonitoringQuery = Annotated[Monitored, Depends(monitoring_query)]


async def monitored_rows(
    request: Request, service: CalibrationService, name: str, query: Monitored
) -> list[dict[str, Any]]:
    """The monitoring rows ``query`` asks for, read off the event loop."""
    return await off_loop(
        request,
        service.traffic.monitoring,
        name,
        query.window,
        query.since,
        query.until,
        version_selector(name, query.version),
        n_bins=query.n_bins,
        resamples=query.bootstrap,
        threshold=query.threshold,
    )


def version_selector(name: str, version: str | None) -> Selector | None:
    """The version a query names (number, latest or alias), None for all."""
    return None if version is None else parse_selector(name, version)
