"""Objects no version names, deleted: ``python -m app.store.collect`` (from cron, hourly).

A fit uploads its blobs before its row commits (:meth:`~app.store.db.Database.offloaded`), so
a fit whose commit fails (a timeout, a lost claim, the database gone) leaves objects behind,
and deleting a version leaves its objects to whoever else names them. Collection is
mark-and-sweep: list the bucket, then read every key the rows name, then delete what no row
names and was last written before a grace period (:data:`GRACE`), far longer than any fit
takes from its upload to its commit. A fit that re-uploads content already there (the same
batch again) rewrites it, but a sweep may have listed the old copy: so the sweep checks each
thousand again, and deletes them, under a lock the rows' writers share
(:meth:`~app.store.blobs.BlobOperations.lock_blobs`), and a fit checks its objects once more
after its commit (:meth:`~app.store.db.Database.kept`): a delete that beat its commit is
undone before the version is answered.

It runs as a command, not in the serving processes: a bucket slow to list would hold up
whatever shares its thread.
"""

from __future__ import annotations

import argparse
import logging
from datetime import UTC, datetime, timedelta

from app.errors import ServiceError
from app.settings import get_settings
from app.store.db import Database

logger = logging.getLogger(__name__)

GRACE = timedelta(hours=1)
"""How old an object no row names must be before it is deleted."""
DELETE_BATCH = 1000
"""Objects checked and deleted under one hold of the blobs' lock (one delete request)."""


def collect_blobs(database: Database, grace: timedelta = GRACE) -> int:
    """Delete the objects of ``database``'s store that no version's row names and that were
    last written more than ``grace`` ago; how many (0 without object storage). Each
    thousand is checked again and deleted under the blobs' lock
    (:meth:`~app.store.blobs.BlobOperations.lock_blobs`), which a version's row takes too, so
    a row committed after the check finds its objects deleted only before its own check
    after its commit (:meth:`~app.store.db.Database.kept`), which uploads them again."""
    objects = database.objects
    if objects is None:
        return 0
    cutoff = datetime.now(UTC) - grace
    listed = [digest for digest, written in objects.listed() if written < cutoff]
    with database.transaction() as repo:
        named = repo.blob_keys()
    unnamed = [digest for digest in listed if digest not in named]
    gone = 0
    for start in range(0, len(unnamed), DELETE_BATCH):
        chunk = unnamed[start : start + DELETE_BATCH]
        with database.transaction(write=True) as repo:
            repo.lock_blobs(shared=False)
            still = repo.blob_keys(chunk)
            doomed = [digest for digest in chunk if digest not in still]
            objects.delete(doomed)
        gone += len(doomed)
    if gone:
        logger.info("deleted %d objects no version names", gone)
    return gone


def main(argv: list[str] | None = None) -> None:
    """Collect the configured service's unnamed objects once."""
    from botocore.exceptions import BotoCoreError, ClientError

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
    except (ServiceError, BotoCoreError, ClientError) as exc:  # a line, not a traceback
        raise SystemExit(f"cannot collect: {getattr(exc, 'detail', exc)}") from None
    finally:
        database.dispose()
    print(f"deleted {gone} objects no version names")


if __name__ == "__main__":
    main()
