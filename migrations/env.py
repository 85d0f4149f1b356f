"""Alembic's entry point: run the migrations against one database.

The URL comes from ``config.attributes["database_url"]`` when :mod:`app.store.migrate` calls
us, else from the service's settings (``CALIBRATION_DATABASE_URL``), so the plain ``alembic``
command works too.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from app.settings import get_settings
from app.store.engines import normalize_url
from app.store.migrate import URL_ATTRIBUTE
from app.store.models import Base
from app.store.traffic.partitions import not_a_partition

config = context.config
url = normalize_url(config.attributes.get(URL_ATTRIBUTE) or get_settings().database_url)
# SQLite alters tables by copying them; batch mode does that, and keeps foreign keys
# unenforced (the pragma is off on this engine) so the copy cascades nothing.
render_as_batch = url.startswith("sqlite")


def run_migrations_offline() -> None:
    """Emit the SQL instead of running it (``alembic upgrade --sql``)."""
    context.configure(
        url=url,
        target_metadata=Base.metadata,
        literal_binds=True,
        render_as_batch=render_as_batch,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run the migrations in one transaction (PostgreSQL's DDL is transactional)."""
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=Base.metadata,
                render_as_batch=render_as_batch,
                include_object=not_a_partition,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
