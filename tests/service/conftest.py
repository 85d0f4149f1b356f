"""The store's factory of complete versions, for the service's tests that build on stored ones
(:mod:`tests.store.conftest`)."""

from tests.store.conftest import make_version

__all__ = ["make_version"]
