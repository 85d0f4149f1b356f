"""Calibrators as a whole: list them, read one with a page of its versions, delete one."""

from __future__ import annotations

from app.service.version_cache import VersionCache
from app.service.views import CalibratorView
from app.store import (
    CalibratorSummary,
    Database,
)


class Calibrators:
    """The use cases of calibrators as a whole: ``service.calibrators.<verb>``."""

    def __init__(self, database: Database, cache: VersionCache) -> None:
        self.database = database
        self.cache = cache

    def list(
        self, limit: int, offset: int, tag: tuple[str, str] | None = None
    ) -> tuple[list[CalibratorSummary], int]:
        """A page of the live calibrators in name order, and how many match in all."""
        with self.database.transaction() as repo:
            return repo.list_calibrators(limit, offset, tag)

    def get(self, name: str, limit: int, offset: int) -> CalibratorView:
        """The calibrator, a page of its versions and its aliases, from one snapshot."""
        with self.database.transaction() as repo:
            summary, versions, total = repo.get_calibrator(name, limit, offset)
            aliases = repo.calibrator_aliases(name)
        return CalibratorView(summary, versions, total, aliases)

    def delete(self, name: str) -> None:
        """Delete every version of ``name``; fitting it again continues the numbering."""
        with self.database.transaction(write=True) as repo:
            repo.delete_calibrator(name)
        self.cache.forget(name)
