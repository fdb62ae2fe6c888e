"""SQL of named locks held across transactions (``locks``): taken with one compare-and-set
upsert (free, or its holder's time ran out), renewed and dropped by their holder only."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, delete, update

from app.queue.sql import dialects
from app.storage.schema import locks


def take(conn: Connection, name: str, holder: str, *, now: datetime, until: datetime) -> bool:
    """Take lock ``name`` for ``holder`` until ``until``, if nobody holds it or its holder's
    time ran out before ``now``; whether it was taken. One statement: of two transactions
    that try at once, the second sees the first's row (PostgreSQL waits for its commit;
    SQLite has one writer at a time)."""
    insert = dialects.of(conn).insert(locks).values(name=name, holder=holder, expires_at=until)
    statement = insert.on_conflict_do_update(
        index_elements=[locks.c.name],
        set_={"holder": holder, "expires_at": until},
        where=locks.c.expires_at < now,
    ).returning(locks.c.holder)
    return conn.execute(statement).first() is not None


def renew(conn: Connection, name: str, holder: str, *, until: datetime) -> bool:
    """Hold ``name`` until ``until``, if ``holder`` still holds it; whether it did."""
    statement = (
        update(locks)
        .where(locks.c.name == name, locks.c.holder == holder)
        .values(expires_at=until)
        .returning(locks.c.name)
    )
    return conn.execute(statement).first() is not None


def drop(conn: Connection, name: str, holder: str) -> None:
    """Let go of ``name``, if ``holder`` holds it."""
    conn.execute(delete(locks).where(locks.c.name == name, locks.c.holder == holder))
