"""One writer per response shape: each is a pydantic model that documents the response in
OpenAPI and writes its JSON (:class:`~app.api.documents.base.Document`)."""

from app.api.documents.base import NAME_PATTERN, Document, Health, Interval, Problem
from app.api.documents.estimates import DecisionOut, EstimateOut, PerformanceOut, PriorOut
from app.api.documents.reports import (
    ComparedVersion,
    CompareOut,
    DiagnosticsOut,
    Difference,
    HeadlineMetricsOut,
    MetricsOut,
    ReliabilityBinOut,
    ReliabilityOut,
    SmoothOut,
    TrafficDiagnosticsOut,
)
from app.api.documents.traffic import (
    MonitoringOut,
    MonitoringWindowOut,
    OutcomesOut,
    WindowIntervalsOut,
)
from app.api.documents.versions import (
    ArtifactInfo,
    CalibratorItem,
    CalibratorList,
    CalibratorOut,
    PredictOut,
    VersionOut,
    VersionSummary,
)

__all__ = [
    "NAME_PATTERN",
    "ArtifactInfo",
    "CalibratorItem",
    "CalibratorList",
    "CalibratorOut",
    "CompareOut",
    "ComparedVersion",
    "DecisionOut",
    "DiagnosticsOut",
    "Difference",
    "Document",
    "EstimateOut",
    "HeadlineMetricsOut",
    "Health",
    "Interval",
    "MetricsOut",
    "MonitoringOut",
    "MonitoringWindowOut",
    "OutcomesOut",
    "PerformanceOut",
    "PredictOut",
    "PriorOut",
    "Problem",
    "ReliabilityBinOut",
    "ReliabilityOut",
    "SmoothOut",
    "TrafficDiagnosticsOut",
    "VersionOut",
    "VersionSummary",
    "WindowIntervalsOut",
]
