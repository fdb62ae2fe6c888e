"""SQL of the type polls (``type_polls``): when a worker last asked for jobs of each type."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, select

from app.queue.sql import dialects
from app.storage.schema_types import type_polls


def record(conn: Connection, job_types: Sequence[str], at: datetime) -> None:
    """Note that a worker asked for ``job_types`` at ``at`` (one upsert; a row only moves
    forward). Rows are written in the order given: give them sorted, so that two processes
    writing the same rows lock them in the same order."""
    insert = dialects.of(conn).insert(type_polls)
    statement = insert.values([{"type": name, "polled_at": at} for name in job_types])
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[type_polls.c.type],
            set_={"polled_at": statement.excluded.polled_at},
            where=type_polls.c.polled_at < statement.excluded.polled_at,
        )
    )


def last_poll(conn: Connection, job_type: str) -> datetime | None:
    """When a worker last asked for ``job_type`` (one primary-key probe)."""
    found: datetime | None = conn.execute(
        select(type_polls.c.polled_at).where(type_polls.c.type == job_type)
    ).scalar()
    return found
