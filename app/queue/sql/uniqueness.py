"""The SQL of uniqueness while active: the turns of enqueues with one (producer, type, key), and
the probe for its active job, in the producer's own namespace or in a parent job's (its
children's)."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Select, bindparam, literal_column, select

from app.queue.sql import dialects
from app.queue.sql.jobs import JOB_COLUMNS, job_of
from app.queue.vocabulary.jobs import Job
from app.storage.schema import jobs
from app.storage.sqltypes import UTCDateTime

# The literal statuses of ix_jobs_unique's predicate, so the partial index serves the probe.
_ACTIVE = jobs.c.status.in_([literal_column("'pending'"), literal_column("'running'")])


def _newest_active(namespace: ColumnElement[bool]) -> Select[Any]:
    """The probe in one namespace: ``parent_id``, the last column of ix_jobs_unique."""
    return (
        select(*JOB_COLUMNS)
        .where(
            jobs.c.created_by == bindparam("owner"),
            jobs.c.type == bindparam("type"),
            jobs.c.unique_key == bindparam("key"),
            namespace,
            _ACTIVE,
            jobs.c.created_at >= bindparam("since", type_=UTCDateTime()),
        )
        .order_by(jobs.c.id.desc())
        .limit(1)
    )


_PRODUCERS = _newest_active(jobs.c.parent_id.is_(None))
_PARENTS = _newest_active(jobs.c.parent_id == bindparam("parent"))


def newest_active(
    conn: Connection,
    owner_id: int,
    job_type: str,
    key: str,
    since: datetime,
    parent_id: int | None = None,
) -> Job | None:
    """The newest pending or running job of ``owner_id`` with this type and unique key,
    enqueued at or after ``since``: among the producer's own jobs, or with ``parent_id``
    among that job's children (one probe of ix_jobs_unique)."""
    params = {"owner": owner_id, "type": job_type, "key": key, "since": since}
    if parent_id is None:
        row = conn.execute(_PRODUCERS, params).first()
    else:
        row = conn.execute(_PARENTS, {**params, "parent": parent_id}).first()
    return job_of(row) if row else None


def take_turns(conn: Connection, keys: Collection[int]) -> None:
    """Hold the locks of ``keys`` until the transaction ends (waiting for their holders)."""
    dialects.of(conn).lock_keys(conn, keys)
