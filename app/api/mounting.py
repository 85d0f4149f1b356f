"""Where the service is mounted: the path prefix a reverse proxy serves it under."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def root_of(scope: Mapping[str, Any]) -> str:
    """The path the service is mounted at behind a proxy (``""`` without one, never a final
    ``/``): what its own links and problem types start with. Starlette keeps it as
    ``app_root_path`` once a mount (a stylesheet's) has added its own path to ``root_path``."""
    root: str = scope.get("app_root_path", scope.get("root_path", "")) or ""
    return root.rstrip("/")


def route_path(scope: Mapping[str, Any]) -> str:
    """The request's path below that prefix: what the service's routes match (uvicorn's
    ``--root-path`` puts the prefix in ``path`` too)."""
    path: str = scope["path"]
    root = root_of(scope)
    if root and (path == root or path.startswith(root + "/")):
        return path[len(root) :] or "/"
    return path
