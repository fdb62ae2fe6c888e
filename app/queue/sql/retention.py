"""The SQL of retention: old finished jobs found through the partial index of finished jobs
(by status and finish time) and deleted in bounded batches with their events, and the record
of what the last prune removed. Deleting a job fires the counter triggers (migrations 0009,
0011), which take it out of ``job_counts`` and ``job_holders`` in the same statement."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, delete, exists, literal_column, select

from app.queue.sql import dialects
from app.queue.sql.items import Columns, Kind, parameter
from app.queue.sql.prepared import Prepared
from app.queue.vocabulary.states import JobStatus
from app.storage.schema import job_events, jobs, retention_runs
from app.storage.sqltypes import UTCDateTime

_OLD = "status = :status AND finished_at IS NOT NULL AND finished_at < :cutoff"
_CUTOFF = bindparam("cutoff", type_=UTCDateTime())
# The oldest finished jobs of one status, walked in the index's order (no sort); on PostgreSQL
# the rows are locked, and rows another transaction holds (an admin retrying one) skipped.
_DOOMED = {
    dialect: Prepared(
        dialect.head("ix_jobs_status_finished", _OLD, "finished_at", bindparam("status"), _CUTOFF)
    )
    for dialect in dialects.DIALECTS.values()
}
_IDS: Columns = (("job_id", Kind.BIGINT),)


def _statements(dialect: dialects.Dialect) -> tuple[Any, Any]:
    """The two DELETEs of a batch: its jobs' events (by the job_id index), then the jobs, whose
    DELETE restates "finished long ago" (a job retried meanwhile stays)."""
    ids = select(dialect.items(_IDS, "doomed").c.job_id)
    events = delete(job_events).where(job_events.c.job_id.in_(ids))
    old = [jobs.c.status == bindparam("status"), jobs.c.finished_at < _CUTOFF]
    return events, delete(jobs).where(jobs.c.id.in_(ids), *old)


_DELETES = {dialect: _statements(dialect) for dialect in dialects.DIALECTS.values()}


def delete_old_jobs(
    conn: Connection, status: JobStatus, cutoff: datetime, limit: int
) -> tuple[int, int]:
    """Delete up to ``limit`` jobs of ``status`` that finished before ``cutoff``, oldest first,
    with their events; returns ``(jobs, events)`` deleted."""
    dialect = dialects.of(conn)
    params: dict[str, Any] = {"status": status.value, "cutoff": cutoff, "limit": limit}
    ids = [row[0] for row in _DOOMED[dialect].rows(conn, params)]
    if not ids:
        return 0, 0
    events_sql, jobs_sql = _DELETES[dialect]
    batch = {"items": parameter(_IDS, [{"job_id": job_id} for job_id in ids])}
    events = conn.execute(events_sql, batch).rowcount
    deleted = conn.execute(jobs_sql, batch | params).rowcount
    return int(deleted), int(events)


def any_old(conn: Connection, cutoffs: Mapping[JobStatus, datetime]) -> bool:
    """Whether any job of a status in ``cutoffs`` finished before that status's cutoff (a probe
    of the index per status; no write lock)."""
    for status, cutoff in cutoffs.items():
        probe = select(
            exists().where(
                jobs.c.status == literal_column(f"'{status.value}'"),
                jobs.c.finished_at.is_not(None),
                jobs.c.finished_at < cutoff,
            )
        )
        if conn.execute(probe).scalar():
            return True
    return False


def save_run(
    conn: Connection, *, at: datetime, jobs_deleted: Mapping[str, int], events: int, audit: int
) -> None:
    """Record what the latest prune removed (one row, replaced each time)."""
    values = {"at": at, "jobs": dict(jobs_deleted), "events": events, "audit_events": audit}
    statement = dialects.of(conn).insert(retention_runs).values(id=1, **values)
    conn.execute(statement.on_conflict_do_update(index_elements=["id"], set_=values))


def last_run(conn: Connection) -> Mapping[str, Any] | None:
    """What the latest prune removed, as recorded (None: no prune has removed anything)."""
    row = conn.execute(select(retention_runs).where(retention_runs.c.id == 1)).first()
    return None if row is None else dict(row._mapping)
