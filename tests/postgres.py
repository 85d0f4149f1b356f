"""PostgreSQL for the tests: a server, a throwaway cluster, and a pool of migrated databases.

A test that asks for a PostgreSQL database borrows one of a :class:`DatabasePool`: a copy of
the migrated template, made once and emptied when the test gives it back, instead of one
``CREATE DATABASE .. TEMPLATE`` and one ``DROP DATABASE`` per test (~0.15 s a test, some 110 s
of the suite; giving back and lending again takes ~0.04 s). Given back, a database is left as
a fresh copy would be, or dropped:

- it is renamed first, after its connections are closed (as ``DROP DATABASE .. WITH (FORCE)``
  closes them): a client the test left behind that connects again finds no database, as it
  found none when each test dropped its own, instead of writing into the next test's;
- its schema must be the template's, partitions of the prediction log aside (tables,
  columns, constraints, indexes, alembic's revision): a test that changed it (a downgrade,
  a detached partition) leaves a database that is dropped, not lent again;
- the partitions of ``predictions`` are the template's again: the days a test made (the
  traffic upkeep makes yesterday's) are dropped, the days it dropped (expiry) made again,
  so that no test sees another's days;
- every table that holds a row is truncated (``alembic_version`` aside), and every sequence
  a test drew from restarts, so that ids begin at 1 as in a fresh copy.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import pytest
from sqlalchemy import Connection, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import NullPool

from app.store import normalize_url
from tests.ports import free_port


def unavailable(reason: str) -> NoReturn:
    """Skip the test without PostgreSQL; under ``CI`` that is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"PostgreSQL is required under CI: {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL unavailable and CI unset: {reason}")


class PostgresServer:
    """A PostgreSQL server on which tests create and drop their own databases."""

    def __init__(self, admin_url: str) -> None:
        self.admin_url = normalize_url(admin_url)
        self._admin = create_engine(self.admin_url, isolation_level="AUTOCOMMIT")
        self._names = (f"calibration_test_{os.getpid()}_{n}" for n in itertools.count())

    def new_name(self) -> str:
        """A database name no other test of this run (nor of another process) uses."""
        return next(self._names)

    def url(self, database: str) -> str:
        """The URL of ``database`` on this server."""
        return make_url(self.admin_url).set(database=database).render_as_string(False)

    def create(self, template: str = "template0") -> str:
        """Create a new database (a copy of ``template``) and return its name."""
        name = self.new_name()
        with self._admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{template}"'))
        return name

    def rename(self, name: str, new: str) -> None:
        """Close every connection to ``name`` (waiting up to 5 s each), then rename it."""
        with self._admin.connect() as connection:
            connection.execute(
                text(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                    "WHERE datname = :name AND pid <> pg_backend_pid()"
                ),
                {"name": name},
            )
            connection.execute(text(f'ALTER DATABASE "{name}" RENAME TO "{new}"'))

    def drop(self, name: str) -> None:
        """Drop ``name``, closing whatever connections a test left open."""
        with self._admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))

    def create_and_drop(self) -> None:
        """Check that the server answers and lets us create databases."""
        self.drop(self.create())

    def close(self) -> None:
        """Release the admin connection pool."""
        self._admin.dispose()


# -- a throwaway cluster --------------------------------------------------------------------
def _bindir() -> Path:
    initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdbs:
        unavailable("no /usr/lib/postgresql/*/bin/initdb and no CALIBRATION_TEST_POSTGRES_URL")
    return Path(initdbs[-1]).parent


def _as_postgres() -> list[str]:
    """The prefix that runs a command as ``postgres``: the server refuses to run as root."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def start_cluster(directory: Path) -> str:
    """initdb and start a throwaway cluster in ``directory``; return its admin URL."""
    bindir = _bindir()
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(directory, user.pw_uid, user.pw_gid)
    data, log = str(directory / "data"), str(directory / "log")
    # --no-sync: a throwaway cluster (run with fsync=off) needs no flush of its new files
    # to disk, which took seconds of a start on a busy disk.
    initdb = [str(bindir / "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"]
    result = subprocess.run(_as_postgres() + initdb, capture_output=True, text=True)
    if result.returncode != 0:
        unavailable(f"initdb failed: {result.stderr or result.stdout}")
    for _ in range(3):  # another process may bind the port between its choice and ours
        port = free_port()
        options = (
            f"-p {port} -k {directory} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        )
        start = [str(bindir / "pg_ctl"), "-D", data, "-o", options, "-l", log, "-w", "start"]
        result = subprocess.run(_as_postgres() + start, capture_output=True, text=True)
        if result.returncode == 0:
            return f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    unavailable(f"pg_ctl start failed: {result.stderr or result.stdout}")


def stop_cluster(directory: Path) -> None:
    """Stop the cluster of ``directory`` if it runs (immediately: it is thrown away)."""
    pg_ctl = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if (directory / "data" / "postmaster.pid").exists() and pg_ctl:
        stop = [pg_ctl[-1], "-D", str(directory / "data"), "-m", "immediate", "stop"]
        subprocess.run(_as_postgres() + stop, capture_output=True, check=False)


# -- the pool -------------------------------------------------------------------------------
_SCHEMA = text(
    """
    WITH tables AS (
        SELECT c.oid, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'public' AND NOT c.relispartition
    )
    SELECT 'relation ' || c.relname || ' ' || c.relkind::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public' AND NOT c.relispartition
    UNION ALL
    SELECT 'column ' || t.relname || '.' || a.attname || ' '
        || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE ''
        END || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
    FROM tables t JOIN pg_attribute a ON a.attrelid = t.oid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'constraint ' || t.relname || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
    FROM tables t JOIN pg_constraint c ON c.conrelid = t.oid
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid)
    FROM tables t JOIN pg_index i ON i.indrelid = t.oid
    UNION ALL
    SELECT 'trigger ' || t.relname || ' ' || g.tgname
    FROM tables t JOIN pg_trigger g ON g.tgrelid = t.oid WHERE NOT g.tgisinternal
    UNION ALL
    SELECT 'function ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = 'public'
    UNION ALL
    SELECT 'schema ' || nspname FROM pg_namespace
    WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'
    """
)
"""The database's schema, line by line, without the partitions (and their indexes)."""

_PARTITIONS = text(
    "SELECT p.relname, c.relname, pg_get_expr(c.relpartbound, c.oid) "
    "FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
    "JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace "
    "WHERE n.nspname = 'public' AND p.relkind = 'p'"
)
"""(parent, partition, its bounds) of every partitioned table."""


@dataclass(frozen=True)
class Shape:
    """What a database fresh from the template holds besides its rows."""

    schema: frozenset[str]
    partitions: frozenset[tuple[str, str, str]]
    tables: tuple[str, ...]
    revision: tuple[str, ...]

    @classmethod
    def of(cls, connection: Connection) -> Shape:
        """The shape of the database ``connection`` is on."""
        tables = connection.scalars(
            text(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') "
                "AND NOT c.relispartition AND c.relname <> 'alembic_version' ORDER BY c.relname"
            )
        )
        revision = connection.scalars(text("SELECT version_num FROM alembic_version"))
        return cls(
            schema=frozenset(connection.scalars(_SCHEMA)),
            partitions=frozenset((p, c, b) for p, c, b in connection.execute(_PARTITIONS)),
            tables=tuple(tables),
            revision=tuple(sorted(revision)),
        )


class DatabasePool:
    """Copies of a migrated template, lent one per test and emptied when given back."""

    def __init__(self, server: PostgresServer, template: str) -> None:
        self._server = server
        self._template = template
        self._idle: list[str] = []
        self._shape: Shape | None = None
        self.made = 0
        self.dropped = 0

    def lend(self) -> str:
        """The name of a database as the template is, for one test."""
        if self._idle:
            return self._idle.pop()
        name = self._server.create(template=self._template)
        self.made += 1
        if self._shape is None:
            self._shape = self._shape_of(name)
        return name

    def give_back(self, name: str) -> None:
        """Take back ``name`` after its test: emptied and renamed for the next, or dropped."""
        new = self._server.new_name()
        try:
            self._server.rename(name, new)
        except DBAPIError:  # a connection came back while it was renamed: drop it, as before
            self._server.drop(name)
            self.dropped += 1
            return
        if self._restore(new):
            self._idle.append(new)
        else:
            self._server.drop(new)
            self.dropped += 1

    def close(self) -> None:
        """Drop the databases that are not lent."""
        for name in self._idle:
            self._server.drop(name)
        self._idle.clear()

    def _shape_of(self, name: str) -> Shape:
        engine = create_engine(self._server.url(name), poolclass=NullPool)
        try:
            with engine.connect() as connection:
                return Shape.of(connection)
        finally:
            engine.dispose()

    def _restore(self, name: str) -> bool:
        """Empty ``name`` as the template is; False when it cannot be (its schema changed)."""
        assert self._shape is not None
        shape = self._shape
        engine = create_engine(self._server.url(name), poolclass=NullPool)
        try:
            with engine.begin() as connection:
                connection.execute(text("SET LOCAL lock_timeout = '5s'"))
                now = Shape.of(connection)
                if (now.schema, now.tables, now.revision) != (
                    shape.schema,
                    shape.tables,
                    shape.revision,
                ):
                    return False
                holding = " UNION ALL ".join(
                    f"SELECT '{table}' WHERE EXISTS (SELECT FROM \"{table}\")"
                    for table in shape.tables
                )
                full = list(connection.scalars(text(holding)))
                if full:
                    tables = ", ".join(map(quoted, full))
                    connection.execute(text(f"TRUNCATE {tables} CASCADE"))
                for _, partition, _ in now.partitions - shape.partitions:
                    connection.execute(text(f'DROP TABLE "{partition}"'))
                for parent, partition, bounds in shape.partitions - now.partitions:
                    connection.execute(
                        text(f'CREATE TABLE "{partition}" PARTITION OF "{parent}" {bounds}')
                    )
                drawn = connection.scalars(
                    text(
                        "SELECT quote_ident(schemaname) || '.' || quote_ident(sequencename) "
                        "FROM pg_sequences WHERE last_value IS NOT NULL"
                    )
                )
                for sequence in list(drawn):
                    connection.execute(text(f"ALTER SEQUENCE {sequence} RESTART"))
            return True
        except DBAPIError:  # a lock the test left, or a partition it reshaped
            return False
        finally:
            engine.dispose()


def quoted(name: str) -> str:
    """``name`` as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
