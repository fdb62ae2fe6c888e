"""SQL on jobs and job events: inserts, reads, listings, pruning and figures. The UPDATEs that
move a job between states live in ``store_transitions``."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    delete,
    func,
    insert,
    literal_column,
    or_,
    select,
)
from sqlalchemy.exc import IntegrityError

from app.queue.models import Event, Job, JobFilters
from app.queue.states import EventKind, JobStatus
from app.schema import job_events, job_holders, jobs

JOB_COLUMNS = [jobs.c[name] for name in Job.__dataclass_fields__]
# Built once: the hottest statements skip per-call construction and cache-key work.
_INSERT_JOB = insert(jobs).returning(*JOB_COLUMNS)
_SELECT_JOB = select(*JOB_COLUMNS).where(jobs.c.id == bindparam("job_id"))
_INSERT_EVENT = insert(job_events)
# Set in a connection's info when a statement made a job pending: the transaction helper wakes
# long-polling claims once the transaction commits.
JOB_DUE = "queuelog_wake"


def insert_job(conn: Connection, values: Mapping[str, Any], *, actor: str) -> Job | None:
    """Insert a job and its ``enqueued`` event; None when its (owner, idempotency key) exists."""
    if values.get("idempotency_key") is None:  # nothing to collide on: no savepoint needed
        row = conn.execute(_INSERT_JOB, dict(values)).one()
    else:
        try:
            with conn.begin_nested():
                row = conn.execute(_INSERT_JOB, dict(values)).one()
        except IntegrityError:
            return None
    conn.info[JOB_DUE] = True
    job = Job.from_row(row._mapping)
    append_event(
        conn, job=job, at=job.created_at, from_status=None, kind=EventKind.ENQUEUED, actor=actor
    )
    return job


def event_row(
    *,
    job: Job,
    at: datetime,
    from_status: str | None,
    kind: EventKind,
    actor: str | None,
    error: str | None = None,
    note: str | None = None,
) -> dict[str, Any]:
    """The ``job_events`` row of the event that brought ``job`` to its current status."""
    return {
        "job_id": job.id,
        "at": at,
        "from_status": from_status,
        "to_status": job.status,
        "actor": actor,
        "attempt": job.attempts or None,
        "kind": kind,
        "error": error,
        "note": note,
    }


def append_event(conn: Connection, **event: Any) -> None:
    """Append the event that brought a job to its current status (``event_row``'s arguments).
    Only ``insert_job`` and the named transitions call it, so no state change goes unrecorded."""
    conn.execute(_INSERT_EVENT, event_row(**event))


def append_events(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Append many ``event_row`` rows in one executemany (a claim of many jobs)."""
    if rows:
        conn.execute(_INSERT_EVENT, rows)


def find_by_idempotency_key(conn: Connection, owner_id: int, key: str) -> Job | None:
    """The job ``owner_id`` enqueued with ``key``, if any."""
    row = conn.execute(
        select(*JOB_COLUMNS).where(jobs.c.created_by == owner_id, jobs.c.idempotency_key == key)
    ).first()
    return Job.from_row(row._mapping) if row else None


def get_job(
    conn: Connection, job_id: int, visible: ColumnElement[bool] | None = None
) -> Job | None:
    """One job by id, optionally restricted by a visibility condition."""
    query = _SELECT_JOB if visible is None else _SELECT_JOB.where(visible)
    row = conn.execute(query, {"job_id": job_id}).first()
    return Job.from_row(row._mapping) if row else None


def visible_to_worker(name: str) -> ColumnElement[bool]:
    """Jobs a worker holds now or held in any earlier attempt."""
    # Every claim makes the worker one of the job's holders (a trigger, migration 0009): one
    # probe of job_holders' primary key per job.
    held = select(job_holders.c.job_id).where(
        job_holders.c.worker == name, job_holders.c.job_id == jobs.c.id
    )
    return held.exists()


def visible_to_owner(user_id: int) -> ColumnElement[bool]:
    """Jobs a producer enqueued."""
    return jobs.c.created_by == user_id


def list_jobs(
    conn: Connection,
    filters: JobFilters,
    visible: ColumnElement[bool] | None,
    *,
    held_by: str | None = None,
) -> tuple[list[Job], bool]:
    """A page of jobs, newest first, and whether more lie beyond it in the paging direction.
    ``held_by``: the jobs that worker holds or held, walked through its holder rows (by its
    index) rather than through every job."""
    conditions: list[ColumnElement[bool]] = [] if visible is None else [visible]
    key, status, ranged = jobs.c.id, jobs.c.status, [jobs.c.id]
    if held_by is not None:
        key, status = job_holders.c.job_id, job_holders.c.status
        ranged.append(key)  # a page's range on both sides of the join, where a merge join starts
        conditions.append(job_holders.c.worker == held_by)
    if filters.status:
        conditions.append(status == filters.status)
    if filters.type:
        conditions.append(jobs.c.type == filters.type)
    if filters.priority is not None:
        conditions.append(jobs.c.priority == filters.priority)
    if filters.search:
        matches = [jobs.c.idempotency_key == filters.search]
        # isascii: str.isdigit() is also true for "¹" or "٣", which int() refuses.
        if filters.search.isascii() and filters.search.isdigit() and len(filters.search) < 18:
            matches.append(jobs.c.id == int(filters.search))
        conditions.append(or_(*matches))
    if filters.before_id is not None:
        conditions += [column < filters.before_id for column in ranged]
    if filters.after_id is not None:
        conditions += [column > filters.after_id for column in ranged]
    newer_first = filters.after_id is None
    query = (
        select(*JOB_COLUMNS)
        .where(and_(True, *conditions))
        .order_by(key.desc() if newer_first else key.asc())
        .limit(filters.limit + 1)
    )
    if held_by is not None:
        query = query.select_from(_HELD)
    found = [Job.from_row(row._mapping) for row in conn.execute(query)]
    more = len(found) > filters.limit
    page = found[: filters.limit]
    return (page if newer_first else page[::-1]), more


# A worker's jobs through its holder rows (ordered by the holder's job_id: the planner does not
# carry an ORDER BY over the join's equality).
_HELD = job_holders.join(jobs, jobs.c.id == job_holders.c.job_id)
# A literal status condition: a partial index (WHERE status = 'pending') only serves a query
# whose own WHERE clause names the same literal, not a bound parameter.
PENDING = jobs.c.status == literal_column("'pending'")


def list_events(conn: Connection, job_id: int) -> list[Event]:
    """A job's transitions, oldest first."""
    query = select(job_events).where(job_events.c.job_id == job_id).order_by(job_events.c.id)
    return [Event.from_row(row._mapping) for row in conn.execute(query)]


def prune_batch(conn: Connection, finished_before: datetime, batch: int) -> int:
    """Delete up to ``batch`` finished jobs (their events go by ON DELETE CASCADE).

    The DELETE restates what "finished long ago" means, so a job an admin retried between the
    lookup and the delete stays (PostgreSQL re-checks the row it would delete)."""

    def finished(table: Any) -> ColumnElement[bool]:
        return and_(
            table.c.status.in_([JobStatus.COMPLETED, JobStatus.FAILED, JobStatus.CANCELLED]),
            table.c.finished_at < finished_before,
        )

    # Any old finished jobs will do: no ORDER BY, so no sort of all of them. The alias keeps
    # the subquery from correlating with the DELETE's own table.
    candidates = jobs.alias("candidates")
    pick = select(candidates.c.id).where(finished(candidates)).limit(batch)
    if conn.dialect.name == "postgresql":
        pick = pick.with_for_update(skip_locked=True)
    # A CTE is evaluated once: PostgreSQL may otherwise re-run a LIMIT subquery per row.
    doomed = select(pick.cte("doomed").c.id)
    deleted = conn.execute(
        delete(jobs).where(jobs.c.id.in_(doomed), finished(jobs)).returning(jobs.c.id)
    ).all()
    return len(deleted)


def oldest_pending_run_at(
    conn: Connection, now: datetime, visible: ColumnElement[bool] | None
) -> datetime | None:
    """When the longest-waiting claimable job became due (one probe of ix_jobs_pending, or of
    ix_jobs_owner_status_run_at for an owner)."""
    query = select(func.min(jobs.c.run_at)).where(PENDING, jobs.c.run_at <= now)
    if visible is not None:
        query = query.where(visible)
    return conn.execute(query).scalar()


def oldest_held_pending_run_at(conn: Connection, now: datetime, worker: str) -> datetime | None:
    """The same among the pending jobs ``worker`` held (one probe of ix_job_holders_pending:
    holder rows keep their job's status and run_at)."""
    query = select(func.min(job_holders.c.run_at)).where(
        job_holders.c.worker == worker,
        job_holders.c.status == literal_column("'pending'"),
        job_holders.c.run_at <= now,
    )
    return conn.execute(query).scalar()


def latest_failures(conn: Connection, limit: int) -> list[Job]:
    """The most recently failed jobs."""
    query = (
        select(*JOB_COLUMNS)
        .where(jobs.c.status == literal_column("'failed'"))
        .order_by(jobs.c.finished_at.desc())
        .limit(limit)
    )
    return [Job.from_row(row._mapping) for row in conn.execute(query)]
