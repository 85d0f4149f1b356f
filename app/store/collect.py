"""Objects no version names, deleted: ``python -m app.store.collect``, and hourly in the service.

A fit uploads its blobs before its row commits (:meth:`~app.store.db.Database.offloaded`), so
a fit whose commit fails (a timeout, a lost claim, the database gone) leaves objects behind,
and deleting a version leaves its objects to whoever else names them. Collection is
mark-and-sweep: list the bucket, then read every key the rows name, then delete what no row
names and was last written before a grace period (:data:`GRACE`), far longer than any fit
takes from its upload to its commit. A fit that re-uploads content already there (the same
batch again) refreshes its time, so it is spared; and a fit checks its objects once more after
its commit (:meth:`~app.store.db.Database.kept`), which closes the one remaining window: a
sweep that listed the old copy before the upload and deleted it after.
"""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime, timedelta

from app.settings import get_settings
from app.store.db import Database

logger = logging.getLogger(__name__)

GRACE = timedelta(hours=1)
"""How old an object no row names must be before it is deleted."""


def collect_blobs(database: Database, grace: timedelta = GRACE) -> int:
    """Delete the objects of ``database``'s store that no version's row names and that were
    last written more than ``grace`` ago; how many (0 without object storage)."""
    objects = database.objects
    if objects is None:
        return 0
    cutoff = datetime.now(UTC) - grace
    listed = [(digest, written) for digest, written in objects.listed() if written < cutoff]
    with database.transaction() as repo:
        named = repo.blob_keys()
    doomed = [digest for digest, _ in listed if digest not in named]
    objects.delete(doomed)
    if doomed:
        logger.info("deleted %d objects no version names", len(doomed))
    return len(doomed)


def main(argv: list[str] | None = None) -> None:
    """Collect the configured service's unnamed objects once."""
    parser = argparse.ArgumentParser(prog="python -m app.store.collect", description=main.__doc__)
    parser.add_argument(
        "--grace-hours", type=float, default=GRACE.total_seconds() / 3600, help="default 1"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    if settings.blob_url is None:
        raise SystemExit("CALIBRATION_BLOB_URL is not set: the blobs are in the database")
    database = Database(settings.database_url, settings, pooled=False)
    try:
        gone = collect_blobs(database, timedelta(hours=args.grace_hours))
    finally:
        database.dispose()
    print(f"deleted {gone} objects no version names")


if __name__ == "__main__":
    main()
