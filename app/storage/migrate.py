"""Alembic, driven from the app: the migrations live in ``app/storage/migrations``.

Alembic is imported only when a command runs it: a server process never migrates, and the
import is about 11 MB of every server process's memory. What readiness needs of it, the newest
revision, is ``HEAD`` (a test checks it against the scripts).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from app.storage.databases import payload_indexes

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Engine

MIGRATIONS = Path(__file__).parent / "migrations"
HEAD = "0028"  # the newest migration: bump it with each new one


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
        payload_indexes.match(conn, payload_keys)
