"""The traffic history: ``python -m app.store.history`` (cron, hourly) writes the prediction
log's days older than ``CALIBRATION_TRAFFIC_HOT_DAYS`` (within the retention) to object
storage, one Parquet file a calibrator and day (:mod:`app.store.traffic.day_files`), and
drops their rows from the database. For each:

1. its rows are read in one snapshot with their fingerprint (:mod:`app.store.traffic.exports`)
   into a temporary file, a row group at a time, and uploaded (boto3's managed upload);
2. under the calibrator's row lock, which every writer of its traffic takes, the fingerprint
   is compared again (an outcome in between makes the file stale: it is written again) and
   ``exported_days`` records the file: reads use it from then on
   (:mod:`app.store.traffic.history`);
3. the rows go. PostgreSQL drops the day's partition once every calibrator of the day is
   recorded and every transaction older than the records has ended (its snapshot would
   find neither rows nor record), checking each fingerprint again under the row locks and
   the partitions' advisory lock (a stale day is exported again first). SQLite deletes
   :data:`DELETE_ROWS` at a time; a batch with a row labelled after the file was read waits
   until the file is patched with the day's late outcomes.

An outcome for an exported prediction finds no logged row: it waits in ``pending_outcomes``
as an unknown id's does, and expires. A run also deletes the files past the retention and
those no record names (a deleted calibrator's, an upload never recorded). One run at a time
(PostgreSQL's advisory lock; a lock file beside SQLite's): a second does nothing.
"""

from __future__ import annotations

import argparse
import fcntl
import logging
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from app.errors import DatabaseUnavailable, ObjectStoreUnavailable, ServiceError
from app.settings import Settings, get_settings
from app.store.db import Database
from app.store.objects import ObjectStore
from app.store.traffic.day_files import file_sha256, patch_day, write_day
from app.store.traffic.exports import ExportRecord

logger = logging.getLogger(__name__)

HISTORY_LOCK = 0x6869_7374  # "hist"
"""The key of the session advisory lock one run holds (PostgreSQL)."""
DELETE_ROWS = 10_000
"""Rows of an exported day deleted per transaction (SQLite)."""
ATTEMPTS = 3
"""Exports of a day whose rows changed while it was written, before the next run."""
WAIT_SECONDS = 60.0
"""How long a drop waits for older transactions to end (then it is left to the next run)."""


@dataclass
class HistoryRun:
    """What a run did: calibrator-days exported (and their rows), calibrator-days whose rows
    left the database, history files deleted; ``skipped`` when another run held the lock."""

    exported: int = 0
    rows: int = 0
    cleared: int = 0
    deleted: int = 0
    skipped: bool = False


def run_history(database: Database, settings: Settings, now: datetime | None = None) -> HistoryRun:
    """Delete the files past the retention, then export the days due and drop their rows
    (nothing without object storage)."""
    if database.objects is None:
        return HistoryRun()
    now = datetime.now(UTC) if now is None else now
    first = (now - timedelta(days=settings.traffic_retention_days)).astimezone(UTC).date()
    due = now.astimezone(UTC).date() - timedelta(days=settings.traffic_hot_days)
    with _alone(database) as alone, tempfile.TemporaryDirectory(prefix="history-") as folder:
        if not alone:
            return HistoryRun(skipped=True)
        export = _Export(database, database.objects, Path(folder))
        export.run.deleted = export.expire(first)
        day = first
        while day < due:
            export.day(day)
            day += timedelta(days=1)
    return export.run


@dataclass
class _Export:
    """One run's exports: where to, where its files are written first, what it did."""

    database: Database
    objects: ObjectStore
    folder: Path
    run: HistoryRun = field(default_factory=HistoryRun)
    stalled: bool = False  # a wait for older transactions timed out: no more drops this run

    def day(self, day: date) -> None:
        """Export ``day`` for each calibrator that has rows in it, and drop them."""
        with self.database.transaction() as repo:
            names = repo.names_logged_on(day)
            done = {name for name in names if repo.exported_day(name, day) is not None}
        for name in names:
            if name not in done:
                self.export(name, day)
        if names and self.database.engine.dialect.name == "postgresql":
            self.drop(day, len(names))
            return
        for name in names:
            self.delete_rows(name, day)

    def export(self, name: str, day: date) -> None:
        """Write ``name``'s ``day`` to the bucket and record it, if its rows stay as read."""
        key, path = self.objects.location.history_key(name, day), self.folder / "day.parquet"
        for _ in range(ATTEMPTS):
            with self.database.transaction() as repo:
                before = repo.exported_day(name, day)
                fingerprint = repo.day_fingerprint(name, day)
                rows = int(fingerprint.split(":")[0])
                if rows == 0:  # the calibrator was deleted meanwhile, and its rows with it
                    return
                if before is not None and rows < before.rows:
                    logger.error("%s's %s has fewer rows than its file: kept as it is", name, day)
                    return
                written = write_day(repo.day_rows(name, day), path)
            self.objects.upload_file(path, key)
            record = ExportRecord.of(name, day, key, written, fingerprint)
            with self.database.transaction(write=True) as repo:
                if repo.keep_export(record, fingerprint):
                    self.run.exported += 1
                    self.run.rows += written.rows
                    return
            logger.info("%s's traffic of %s changed while it was exported: again", name, day)

    def drop(self, day: date, names: int) -> None:
        """PostgreSQL: drop ``day``'s rows once every calibrator's file is recorded and still
        what the rows are (a stale one exported again), after older transactions ended."""
        for _ in range(ATTEMPTS):
            if self.stalled or not _older_ended(self.database):
                logger.warning("transactions older than %s's export still run: later", day)
                self.stalled = True
                return
            try:
                with self.database.transaction(write=True) as repo:
                    stale = repo.drop_exported_day(day)
            except DatabaseUnavailable as exc:  # the partition's lock not had in time
                logger.warning("%s's rows could not be dropped now (%s): later", day, exc)
                return
            if not stale:
                self.run.cleared += names
                return
            for name in stale:
                logger.info("%s's traffic of %s changed after its export: again", name, day)
                self.export(name, day)

    def delete_rows(self, name: str, day: date) -> None:
        """SQLite: delete ``name``'s rows of its exported ``day`` a batch at a time, the file
        patched first with the outcomes that labelled some of them after it was read."""
        with self.database.transaction() as repo:
            record = repo.exported_day(name, day)
        patches = 0
        while record is not None:
            deleted, late = _delete_batch(self.database, record)
            if late and patches < ATTEMPTS:
                record, patches = self.patched(record, late), patches + 1
            elif late:
                return  # outcomes keep coming: the next run goes on
            elif deleted < DELETE_ROWS:
                self.run.cleared += 1
                return

    def patched(self, record: ExportRecord, late: dict[str, tuple[int, int]]) -> ExportRecord:
        """``record``'s file written again with the ``late`` outcomes, uploaded, recorded."""
        source, target = self.folder / "source.parquet", self.folder / "patched.parquet"
        self.objects.download_file(record.object_key, source)
        if file_sha256(source) != record.sha256:
            raise ObjectStoreUnavailable(f"the history file {record.object_key} changed")
        written = patch_day(source, late, target)
        self.objects.upload_file(target, record.object_key)
        key, fingerprint = record.object_key, record.fingerprint
        patched = ExportRecord.of(record.name, record.day, key, written, fingerprint)
        with self.database.transaction(write=True) as repo:
            repo.keep_export(patched, None)
        logger.info(
            "%s's %s: %d outcomes came after its export", record.name, record.day, len(late)
        )
        return patched

    def expire(self, first: date) -> int:
        """Forget the days before ``first``, delete every history file no record names; how
        many files."""
        with self.database.transaction(write=True) as repo:
            repo.forget_exports(first)
            named = repo.export_keys()
        under = self.objects.location.history
        doomed = [under + key for key, _ in self.objects.listed(under) if under + key not in named]
        for start in range(0, len(doomed), 1000):
            self.objects.delete_keys(doomed[start : start + 1000])
        return len(doomed)


def _older_ended(database: Database) -> bool:
    """Whether every other transaction that began before now has ended (within
    :data:`WAIT_SECONDS`): none can hold a snapshot without this run's records."""
    with database.transaction() as repo:
        moment = repo.database_clock()
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        with database.transaction() as repo:  # a new transaction: a fresh look at them
            if repo.older_transactions(moment) == 0:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _delete_batch(
    database: Database, record: ExportRecord
) -> tuple[int, dict[str, tuple[int, int]]]:
    """One batch of deletes (SQLite), a transaction: rows deleted, or the late outcomes."""
    with database.transaction(write=True) as repo:
        return repo.delete_exported_rows(record, DELETE_ROWS)


@contextmanager
def _alone(database: Database) -> Iterator[bool]:
    """Whether this run is the only one, held while in the block: PostgreSQL's session
    advisory lock on a connection of its own (idle between), or SQLite's lock file."""
    if database.engine.dialect.name == "postgresql":
        with database.engine.connect() as connection:
            lock = text("SELECT pg_try_advisory_lock(:key)")
            held = bool(connection.execute(lock, {"key": HISTORY_LOCK}).scalar())
            connection.commit()
            try:
                yield held
            finally:
                if held:
                    connection.execute(
                        text("SELECT pg_advisory_unlock(:key)"), {"key": HISTORY_LOCK}
                    )
                    connection.commit()
        return
    path = database.engine.url.database
    if not path or path.startswith((":memory:", "file:")):
        yield True
        return
    with Path(f"{path}.history-lock").open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> None:
    """Export the configured service's old traffic and delete the files past retention."""
    from botocore.exceptions import BotoCoreError, ClientError

    parser = argparse.ArgumentParser(prog="python -m app.store.history", description=main.__doc__)
    parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = get_settings()
    if settings.blob_url is None:
        raise SystemExit(
            "CALIBRATION_BLOB_URL is not set: the traffic history stays in the database"
        )
    database = Database(settings.database_url, settings, pooled=False)
    try:
        run = run_history(database, settings)
    except (ServiceError, BotoCoreError, ClientError) as exc:  # a line, not a traceback
        raise SystemExit(f"cannot export: {getattr(exc, 'detail', exc)}") from None
    finally:
        database.dispose()
    if run.skipped:
        print("another python -m app.store.history is running: nothing done")
        return
    print(
        f"exported {run.exported} calibrator-days ({run.rows} rows), cleared {run.cleared} "
        f"from the database, deleted {run.deleted} history files"
    )


if __name__ == "__main__":
    main()
