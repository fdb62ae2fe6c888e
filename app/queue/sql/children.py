"""SQL of a job's children: the jobs its workers spawned, read through ``ix_jobs_parent``."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Connection, select

from app.queue.sql.jobs import JOB_COLUMNS, job_of
from app.queue.vocabulary.models import Actor, Job
from app.queue.vocabulary.states import Role
from app.storage.schema import jobs, users


def children(
    conn: Connection, parent_id: int, visible: ColumnElement[bool] | None, limit: int
) -> list[Job]:
    """Up to ``limit`` children of ``parent_id`` that ``visible`` selects (None: all), oldest
    first (the index's order, so the read stops at ``limit``)."""
    conditions = [jobs.c.parent_id == parent_id]
    if visible is not None:
        conditions.append(visible)
    query = select(*JOB_COLUMNS).where(*conditions).order_by(jobs.c.id).limit(limit)
    return [job_of(row) for row in conn.execute(query)]


def producer(conn: Connection, user_id: int) -> tuple[Actor, bool] | None:
    """The user who enqueued a job, as an actor, and whether the account is disabled (None:
    no such user any more)."""
    columns = (users.c.id, users.c.name, users.c.role, users.c.max_priority, users.c.disabled)
    row = conn.execute(select(*columns).where(users.c.id == user_id)).first()
    if row is None:
        return None
    actor = Actor(id=row.id, name=row.name, role=Role(row.role), max_priority=row.max_priority)
    return actor, bool(row.disabled)
