"""Alembic, driven from the app: the migrations live in ``app/storage/migrations``.

Alembic is imported only when a command runs it: a server process never migrates, and the
import is about 11 MB of every server process's memory. What readiness needs of it, the newest
revision, is ``HEAD`` (a test checks it against the scripts).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from app.storage import payload_indexes

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Connection, Engine

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0026"  # the newest migration: bump it with each new one


def alembic_config() -> Config:
    """An Alembic config pointing at the app's migration scripts."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine, revision: str = "head", *, payload_keys: Collection[str] = ()) -> None:
    """Create or migrate the schema of ``engine``'s database (``app.infra.db.engine(app)``),
    with the indexes of the payload keys searched fast (PAYLOAD_SEARCH_KEYS)."""
    from alembic import command

    config = alembic_config()
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)
        index_payload_keys(conn, payload_keys)


def index_payload_keys(conn: Connection, keys: Collection[str]) -> tuple[list[str], list[str]]:
    """Create the index of each of ``keys`` that lacks one and drop those of keys no longer
    named; the names created and dropped. Safe when several processes migrate at once: they
    take turns (SQLite's transactions begin by taking the write lock; on PostgreSQL an advisory
    lock), and each sees what the one before it did."""
    if conn.dialect.name == "sqlite":
        listed, create = _SQLITE_INDEXES, payload_indexes.sqlite_create_sql
    else:
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({_INDEXING_LOCK})")
        listed, create = _POSTGRESQL_INDEXES, payload_indexes.postgresql_create_sql
    present = {
        row[0] for row in conn.exec_driver_sql(listed) if row[0].startswith(payload_indexes.PREFIX)
    }
    wanted = {payload_indexes.index_name(key): key for key in keys}
    dropped = sorted(present - set(wanted))
    for name in dropped:
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
    created = sorted(name for name in wanted if name not in present)
    for name in created:
        conn.exec_driver_sql(create(wanted[name]))
    return created, dropped


_SQLITE_INDEXES = "SELECT name FROM sqlite_master WHERE type = 'index'"
_POSTGRESQL_INDEXES = "SELECT indexname FROM pg_indexes WHERE tablename = 'jobs'"
_INDEXING_LOCK = 0x7051_5345_4152  # any constant no other lock of the app takes
