"""The PostgreSQL tests' databases: clones of the migrated template, emptied and reused.

A fresh clone for every test was most of a PostgreSQL test's setup: the server copies the
template's files, its catalog included, around two checkpoints, and dropping the clone writes
again; with four test processes on two cores that was a quarter of the whole test run. So a
test's database is emptied when the test ends and handed to the next test of the process, in the
state a clone starts in: none of the test's connections left, the template's rows only, its
sequences' values, no planner statistics. Emptying is one script of deletes sent in one round
trip over a connection kept for it (about 10 ms), with triggers and key checks off as they are
for a replica: the rows go whole, the counters with them. A test that changed the schema (a
payload index, a migration) leaves a database that is dropped instead; the next test gets a
fresh clone.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from psycopg.sql import Literal
from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.exc import ProgrammingError

# What a test could change beyond rows: the public schema's relations (a payload index is a new
# one), triggers and functions, the migration the database is at.
_SCHEMA = text(
    """
    SELECT (SELECT string_agg(oid::text || relname || relkind::text, ',' ORDER BY oid)
              FROM pg_class WHERE relnamespace = 'public'::regnamespace),
           (SELECT count(*) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
             WHERE c.relnamespace = 'public'::regnamespace),
           (SELECT count(*) FROM pg_trigger),
           (SELECT count(*) FROM pg_proc WHERE pronamespace = 'public'::regnamespace),
           (SELECT count(*) FROM pg_namespace),
           (SELECT string_agg(version_num, ',') FROM alembic_version)
    """
)
_TABLES = text(
    "SELECT quote_ident(tablename) FROM pg_tables"
    " WHERE schemaname = 'public' AND tablename <> 'alembic_version'"
)
_SEQUENCES = text(
    "SELECT quote_ident(sequencename), last_value, start_value FROM pg_sequences"
    " WHERE schemaname = 'public'"
)
_OTHER_CONNECTIONS = text(
    "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
    " WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
_STATISTICS = (
    "DELETE FROM pg_statistic WHERE starelid IN"
    " (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)"
)


_NAMES = itertools.count(1)  # every pool of the process names its databases from one count


class _Template:
    """What a clone of the template starts with, read from the first clone, and the script that
    puts a database back in that state (every name in it is the catalog's, quoted by the server;
    every value a literal quoted by the driver)."""

    def __init__(self, conn: Connection) -> None:
        self.schema = tuple(conn.execute(_SCHEMA).one())
        tables = [str(name) for (name,) in conn.execute(_TABLES)]
        statements = ["SET LOCAL session_replication_role = replica"]
        statements += [f"DELETE FROM {table}" for table in tables]  # noqa: S608
        for table in tables:
            rows = conn.execute(text(f"SELECT json_agg(t)::text FROM {table} t")).scalar()  # noqa: S608
            if rows:
                rows_of = f"json_populate_recordset(NULL::{table}, {Literal(rows).as_string(None)})"
                statements.append(f"INSERT INTO {table} SELECT * FROM {rows_of}")  # noqa: S608
        for name, last_value, start_value in conn.execute(_SEQUENCES):
            called = last_value is not None
            value = last_value if called else start_value
            statements.append(f"SELECT setval({Literal(name).as_string(None)}, {value}, {called})")
        statements.append(_STATISTICS)
        self.restore = ";\n".join(statements)


class Databases:
    """One test process's PostgreSQL databases: ``take`` one for a test, ``give_back`` after."""

    def __init__(self, server_url: str, template: str) -> None:
        self.server_url = server_url
        self.template = template
        self.admin = create_engine(f"{server_url}/postgres", isolation_level="AUTOCOMMIT")
        self.ready: list[str] = []
        self.keepers: dict[str, Engine] = {}  # one kept connection to each database
        self.cloned: _Template | None = None
        self.dropped: queue.Queue[str | None] = queue.Queue()
        self.dropper = threading.Thread(target=self._drop, name="drop-databases", daemon=True)
        self.dropper.start()

    @contextmanager
    def lent(self) -> Iterator[str]:
        """A database for one test, or one module's tests: its URL; given back after."""
        name = self.take()
        try:
            yield f"{self.server_url}/{name}"
        finally:
            self.give_back(name)

    def take(self) -> str:
        """A database in the state of a fresh clone of the template."""
        if self.ready:
            return self.ready.pop()
        name = f"test_{next(_NAMES)}"
        with self.admin.connect() as conn:
            conn.execute(
                text(f"CREATE DATABASE {name} TEMPLATE {self.template} STRATEGY FILE_COPY")
            )
        self.keepers[name] = create_engine(f"{self.server_url}/{name}", pool_size=1)
        if self.cloned is None:
            with self.keepers[name].connect() as conn:
                self.cloned = _Template(conn)
        return name

    def give_back(self, name: str) -> None:
        """Empty the database for the next test, or drop it if the test changed its schema."""
        assert self.cloned is not None
        with self.keepers[name].connect() as conn:
            conn.execute(_OTHER_CONNECTIONS)
            conn.commit()
            try:
                unchanged = tuple(conn.execute(_SCHEMA).one()) == self.cloned.schema
            except ProgrammingError:  # the test dropped a table the question reads
                unchanged = False
            conn.rollback()
            if unchanged:  # one round trip: statements without parameters
                driver = conn.connection.driver_connection
                assert driver is not None
                driver.execute(self.cloned.restore)
                driver.commit()
        if unchanged:
            self.ready.append(name)
        else:
            self.keepers.pop(name).dispose()
            self.dropped.put(name)

    def _drop(self) -> None:
        while (name := self.dropped.get()) is not None:
            with self.admin.connect() as conn:
                conn.execute(text(f"DROP DATABASE {name} WITH (FORCE)"))

    def close(self) -> None:
        for engine in self.keepers.values():
            engine.dispose()
        self.dropped.put(None)
        self.dropper.join()
        self.admin.dispose()
