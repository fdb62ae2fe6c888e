"""The SQL of uniqueness while active: the turns of enqueues with one (producer, type, key), and
the probe for its active job."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from sqlalchemy import Connection, bindparam, literal_column, select

from app.queue.sql import dialects
from app.queue.sql.jobs import JOB_COLUMNS, job_of
from app.queue.vocabulary.models import Job
from app.storage.schema import jobs
from app.storage.sqltypes import UTCDateTime

# The literal statuses of ix_jobs_unique's predicate, so the partial index serves the probe.
_ACTIVE = jobs.c.status.in_([literal_column("'pending'"), literal_column("'running'")])
_NEWEST_ACTIVE = (
    select(*JOB_COLUMNS)
    .where(
        jobs.c.created_by == bindparam("owner"),
        jobs.c.type == bindparam("type"),
        jobs.c.unique_key == bindparam("key"),
        _ACTIVE,
        jobs.c.created_at >= bindparam("since", type_=UTCDateTime()),
    )
    .order_by(jobs.c.id.desc())
    .limit(1)
)


def newest_active(
    conn: Connection, owner_id: int, job_type: str, key: str, since: datetime
) -> Job | None:
    """The newest pending or running job of ``owner_id`` with this type and unique key,
    enqueued at or after ``since`` (one probe of ix_jobs_unique)."""
    params = {"owner": owner_id, "type": job_type, "key": key, "since": since}
    row = conn.execute(_NEWEST_ACTIVE, params).first()
    return job_of(row) if row else None


def take_turns(conn: Connection, keys: Collection[int]) -> None:
    """Hold the locks of ``keys`` until the transaction ends (waiting for their holders)."""
    dialects.of(conn).lock_keys(conn, keys)
