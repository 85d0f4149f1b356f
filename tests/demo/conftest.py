"""The demo's tests run against the web view's open app on SQLite (:mod:`tests.ui.conftest`)."""

from tests.ui.conftest import backend, open_client

__all__ = ["backend", "open_client"]
