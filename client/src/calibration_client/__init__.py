"""The Python client of the calibration service (docs/python.md).

``Client`` and ``AsyncClient`` call the service; results are typed, arrays are numpy; every
failure is a :class:`CalibrationError`. ``RemoteCalibrator``, the scikit-learn estimator, is
imported on first use, so importing this package never imports scikit-learn."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from calibration_client._async import AsyncClient
from calibration_client._batches import BULK_ROWS
from calibration_client._errors import (
    APIConnectionError,
    APIResponseValidationError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CalibrationError,
    ClientError,
    ConflictError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    ServiceUnavailableError,
    UnprocessableError,
)
from calibration_client._sync import Client
from calibration_client._traffic_types import (
    Decision,
    DecisionCost,
    Estimate,
    Performance,
    Prior,
    Window,
)
from calibration_client._types import (
    Comparison,
    Diagnostics,
    OutcomeReceipt,
    Prediction,
    RankedVersion,
    ReliabilityCurve,
    Version,
)
from calibration_client._version import __version__

if TYPE_CHECKING:  # imported on first use at run time (see __getattr__)
    from calibration_client.sklearn import RemoteCalibrator

__all__ = [
    "BULK_ROWS",
    "APIConnectionError",
    "APIResponseValidationError",
    "APITimeoutError",
    "AsyncClient",
    "AuthenticationError",
    "BadRequestError",
    "CalibrationError",
    "Client",
    "ClientError",
    "Comparison",
    "ConflictError",
    "Decision",
    "DecisionCost",
    "Diagnostics",
    "Estimate",
    "NotFoundError",
    "OutcomeReceipt",
    "PayloadTooLargeError",
    "Performance",
    "PermissionDeniedError",
    "Prediction",
    "Prior",
    "RankedVersion",
    "RateLimitError",
    "ReliabilityCurve",
    "RemoteCalibrator",
    "ServerError",
    "ServiceUnavailableError",
    "UnprocessableError",
    "Version",
    "Window",
    "__version__",
]


def __getattr__(name: str) -> Any:
    """``RemoteCalibrator`` from :mod:`calibration_client.sklearn`, imported when first asked
    for (scikit-learn loads in about a second, and only its users need it)."""
    if name == "RemoteCalibrator":
        return importlib.import_module("calibration_client.sklearn").RemoteCalibrator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
