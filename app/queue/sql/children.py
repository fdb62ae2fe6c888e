"""SQL of a job's children: the jobs its workers spawned, read through ``ix_jobs_parent``, and
their idempotency keys, which live in the parent's namespace (``uq_jobs_child_key``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import NamedTuple

from sqlalchemy import ColumnElement, Connection, bindparam, func, or_, select

from app.queue.sql.jobs import JOB_COLUMNS, job_of
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import Job
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


def family(parent_id: int) -> ColumnElement[bool]:
    """The job ``parent_id`` and its children (by ``ix_jobs_parent``)."""
    return or_(jobs.c.id == parent_id, jobs.c.parent_id == parent_id)


_BY_KEYS = select(*JOB_COLUMNS).where(
    jobs.c.parent_id == bindparam("parent"),
    jobs.c.child_key.in_(bindparam("keys", expanding=True)),
)


def keyed_children(conn: Connection, parent_id: int, keys: Collection[str]) -> list[Job]:
    """The children of ``parent_id`` spawned with any of ``keys`` (one probe of
    ``uq_jobs_child_key`` per key)."""
    if not keys:
        return []
    return [job_of(row) for row in conn.execute(_BY_KEYS, {"parent": parent_id, "keys": [*keys]})]


def count(conn: Connection, parent_id: int) -> int:
    """How many children ``parent_id`` has (its entries in ``ix_jobs_parent``)."""
    query = select(func.count()).where(jobs.c.parent_id == parent_id)
    return int(conn.execute(query).scalar_one())


class Producer(NamedTuple):
    """The user who enqueued a job, as its row says."""

    id: int
    name: str
    role: str
    max_priority: int
    disabled: bool

    def actor(self) -> Actor:
        """The producer as the policy reads a caller (whether it may still enqueue, its cap)."""
        return Actor(self.id, self.name, Role(self.role), self.max_priority)


def producer(conn: Connection, user_id: int) -> Producer | None:
    """The user who enqueued a job (None: no such user any more)."""
    columns = (users.c.id, users.c.name, users.c.role, users.c.max_priority, users.c.disabled)
    row = conn.execute(select(*columns).where(users.c.id == user_id)).first()
    return None if row is None else Producer(*row[:4], bool(row.disabled))
