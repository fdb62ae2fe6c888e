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
HEAD = "0027"  # the newest migration: bump it with each new one


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
    """On SQLite, create the index of each of ``keys`` that lacks one and drop those of keys no
    longer named; the names created and dropped. Safe when several processes migrate at once:
    SQLite's transactions begin by taking the write lock, so they take turns, and each sees what
    the one before it did. PostgreSQL's GIN index of payloads (migration 0027) serves any key."""
    if conn.dialect.name != "sqlite":
        return [], []
    present = {
        row[0]
        for row in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")
        if row[0].startswith(payload_indexes.PREFIX)
    }
    wanted = {payload_indexes.index_name(key): key for key in keys}
    dropped = sorted(present - set(wanted))
    for name in dropped:
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {name}")
    created = sorted(name for name in wanted if name not in present)
    for name in created:
        conn.exec_driver_sql(payload_indexes.create_sql(wanted[name]))
    return created, dropped
