"""Schema migrations: Alembic, configured from ``[tool.alembic]`` in pyproject.toml.

``python -m app.store.migrate`` brings the configured database (``CALIBRATION_DATABASE_URL``)
to the newest revision; ``make migrate`` calls it (``make run`` migrates through
:mod:`app.server.startup`). Tests call :func:`upgrade` and :func:`downgrade` with their own URLs.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy.exc import OperationalError

from app.settings import get_settings
from app.store.engines import normalize_url

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
    """Migrate the database at ``url`` up to ``revision``."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    """Migrate the database at ``url`` down to ``revision`` (``base``: no tables at all)."""
    command.downgrade(alembic_config(url), revision)


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
