"""Schema migrations: Alembic, configured from ``[tool.alembic]`` in pyproject.toml.

``python -m app.store.migrate`` brings the configured database (``CALIBRATION_DATABASE_URL``)
to the newest revision; ``make migrate`` calls it (``make run`` migrates through
:mod:`app.server.startup`, through :func:`migrate_when_ready`: replicas that start at once
migrate one after the other). Tests call :func:`upgrade` and :func:`downgrade` with their own
URLs.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import InterfaceError, OperationalError
from sqlalchemy.pool import NullPool

from app.settings import Settings, get_settings
from app.store.engines import make_engine, normalize_url

logger = logging.getLogger("app.startup")

MIGRATION_WAIT_SECONDS = 60.0
"""How long to keep retrying a database that does not answer before giving up."""

MIGRATION_RETRY_SECONDS = 1.0
"""The pause between two attempts to reach the database."""

MIGRATION_LOCK_ID = 0x63616C6962726174
"""The PostgreSQL advisory lock key held while migrating (the bytes of ``b"calibrat"``)."""

_UNREACHABLE = (OperationalError, InterfaceError)


PROJECT_ROOT = Path(__file__).resolve().parents[2]
URL_ATTRIBUTE = "database_url"
"""The key of ``Config.attributes`` through which ``migrations/env.py`` receives the URL."""


def alembic_config(url: str) -> Config:
    """The Alembic configuration for migrating the database at ``url``."""
    pyproject = PROJECT_ROOT / "pyproject.toml"
    config = Config(toml_file=pyproject, attributes={URL_ATTRIBUTE: normalize_url(url)})
    if not pyproject.exists():  # e.g. an image that ships app/ and migrations/ only
        location = (PROJECT_ROOT / "migrations").as_posix().replace("%", "%%")
        config.set_main_option("script_location", location)
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` up to ``revision``; an SQLite file is left in WAL mode
    (:func:`write_ahead_log`)."""
    command.upgrade(alembic_config(url), revision)
    write_ahead_log(url)


def write_ahead_log(url: str) -> None:
    """Switch the SQLite file at ``url`` to WAL mode, which the file keeps (nothing for other
    backends, or a database in memory). Every connection the service opens asks for WAL too
    (:mod:`app.store.engines`), but switching needs the file to itself: while the first
    requests of a fresh file raced to switch it, SQLite refused some of them at once ("database
    is locked", without waiting out the busy timeout), which became 503s. Migrated here, the
    file is in WAL mode before anything serves it, and those requests find nothing to switch."""
    url = normalize_url(url)
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    engine = make_engine(url, get_settings(), pooled=False)  # its connections ask for WAL
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate the database at ``url`` down to ``revision`` (``base``: no tables at all)."""
    command.downgrade(alembic_config(url), revision)


@contextmanager
def migration_lock(url: str, connect_timeout: float) -> Iterator[None]:
    """Hold PostgreSQL's advisory lock :data:`MIGRATION_LOCK_ID` (nothing on other backends).

    The lock belongs to a session of its own, so it is released when the block ends, or by
    the server when this process dies holding it.
    """
    url = normalize_url(url)
    if make_url(url).get_backend_name() != "postgresql":
        yield
        return
    engine = create_engine(
        url, poolclass=NullPool, connect_args={"connect_timeout": max(1, round(connect_timeout))}
    )
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_ID})
            try:
                yield
            finally:
                connection.execute(
                    text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_ID}
                )
    finally:
        engine.dispose()


def migrate_when_ready(
    settings: Settings,
    wait_seconds: float = MIGRATION_WAIT_SECONDS,
    retry_seconds: float = MIGRATION_RETRY_SECONDS,
) -> None:
    """Upgrade ``settings.database_url`` to head, retrying while the database does not answer.

    Raises :class:`SystemExit` when it still does not answer after ``wait_seconds``. Errors
    other than an unreachable database (a failing migration) are raised at once.
    """
    url = settings.database_url
    safe_url = make_url(normalize_url(url)).render_as_string(hide_password=True)
    deadline = time.monotonic() + wait_seconds
    attempt = 0
    while True:
        attempt += 1
        try:
            with migration_lock(url, settings.db_connect_timeout_seconds):
                upgrade(url)
        except _UNREACHABLE as exc:
            reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            if time.monotonic() + retry_seconds > deadline:
                raise SystemExit(
                    f"cannot migrate: {safe_url} did not answer within {wait_seconds:g} s "
                    f"({attempt} attempts; last error: {reason})"
                ) from exc
            logger.warning(
                "database %s not ready (attempt %d: %s); retrying in %g s",
                safe_url,
                attempt,
                reason,
                retry_seconds,
            )
            time.sleep(retry_seconds)
        else:
            logger.info("database %s is at the newest revision", safe_url)
            return


def main(argv: list[str] | None = None) -> None:
    """Upgrade the configured database to ``head`` (or the revision given)."""
    parser = argparse.ArgumentParser(prog="python -m app.store.migrate", description=main.__doc__)
    parser.add_argument("revision", nargs="?", default="head")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        upgrade(get_settings().database_url, args.revision)
    except OperationalError as exc:
        raise SystemExit(f"cannot migrate: the database did not answer ({exc.orig})") from exc


if __name__ == "__main__":
    main()
