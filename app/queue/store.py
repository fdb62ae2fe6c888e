"""All SQL on jobs and job events. Every state change is one compare-and-set UPDATE whose
WHERE clause names the state it expects, so a lost race updates nothing and returns None."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy.exc import IntegrityError

from app.queue.models import Event, Job, JobFilters
from app.queue.states import JobStatus
from app.schema import UTCDateTime, job_events, jobs

_JOB_COLUMNS = [jobs.c[name] for name in Job.__dataclass_fields__]
# Built once: the hottest statements skip per-call construction and cache-key work.
_INSERT_JOB = insert(jobs).returning(*_JOB_COLUMNS)
_SELECT_JOB = select(*_JOB_COLUMNS).where(jobs.c.id == bindparam("job_id"))
_INSERT_EVENT = insert(job_events)
# Set in a connection's info when a statement made a job pending: the transaction helper wakes
# long-polling claims once the transaction commits.
JOB_DUE = "queuelog_wake"


def insert_job(conn: Connection, values: Mapping[str, Any]) -> Job | None:
    """Insert a job; None when its (owner, idempotency key) already exists."""
    try:
        with conn.begin_nested():
            row = conn.execute(_INSERT_JOB, dict(values)).one()
    except IntegrityError:
        if values.get("idempotency_key") is None:
            raise
        return None
    conn.info[JOB_DUE] = True
    return Job.from_row(row._mapping)


def find_by_idempotency_key(conn: Connection, owner_id: int, key: str) -> Job | None:
    """The job ``owner_id`` enqueued with ``key``, if any."""
    row = conn.execute(
        select(*_JOB_COLUMNS).where(jobs.c.created_by == owner_id, jobs.c.idempotency_key == key)
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
    # Every claim writes a running event with the worker as actor, so the events alone say
    # which jobs a worker holds or held (and their index answers it).
    held = select(job_events.c.job_id).where(
        job_events.c.actor == name, job_events.c.to_status == JobStatus.RUNNING
    )
    return jobs.c.id.in_(held)


def visible_to_owner(user_id: int) -> ColumnElement[bool]:
    """Jobs a producer enqueued."""
    return jobs.c.created_by == user_id


def list_jobs(
    conn: Connection, filters: JobFilters, visible: ColumnElement[bool] | None
) -> tuple[list[Job], bool]:
    """A page of jobs, newest first, and whether more lie beyond it in the paging direction."""
    conditions: list[ColumnElement[bool]] = [] if visible is None else [visible]
    if filters.status:
        conditions.append(jobs.c.status == filters.status)
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
        conditions.append(jobs.c.id < filters.before_id)
    if filters.after_id is not None:
        conditions.append(jobs.c.id > filters.after_id)
    newer_first = filters.after_id is None
    query = (
        select(*_JOB_COLUMNS)
        .where(and_(True, *conditions))
        .order_by(jobs.c.id.desc() if newer_first else jobs.c.id.asc())
        .limit(filters.limit + 1)
    )
    found = [Job.from_row(row._mapping) for row in conn.execute(query)]
    more = len(found) > filters.limit
    page = found[: filters.limit]
    return (page if newer_first else page[::-1]), more


# Literal status conditions: a partial index (WHERE status = 'pending') only serves a query
# whose own WHERE clause names the same literal, not a bound parameter.
_PENDING = jobs.c.status == literal_column("'pending'")
_RUNNING = jobs.c.status == literal_column("'running'")


def _now() -> Any:
    return bindparam("now", type_=UTCDateTime())


# SQLite's planner would otherwise pick the (status, id) index and sort the whole queue, so the
# queue-head lookups name their partial index; PostgreSQL adds SKIP LOCKED so claims never wait.
_CLAIM_HEAD = {
    "sqlite": text(
        "SELECT id FROM jobs INDEXED BY ix_jobs_claim WHERE status = 'pending' AND run_at <= :now "
        "ORDER BY priority DESC, run_at, id LIMIT 1"
    )
    .bindparams(_now())
    .columns(jobs.c.id),
    "postgresql": select(jobs.c.id)
    .where(_PENDING, jobs.c.run_at <= _now())
    .order_by(jobs.c.priority.desc(), jobs.c.run_at, jobs.c.id)
    .limit(1)
    .with_for_update(skip_locked=True),
}
_EXPIRED_IDS = {
    "sqlite": text(
        "SELECT id FROM jobs INDEXED BY ix_jobs_lease WHERE status = 'running' "
        "AND lease_expires_at < :now ORDER BY lease_expires_at LIMIT :limit"
    )
    .bindparams(_now(), bindparam("limit"))
    .columns(jobs.c.id),
    "postgresql": select(jobs.c.id)
    .where(_RUNNING, jobs.c.lease_expires_at < _now())
    .order_by(jobs.c.lease_expires_at)
    .limit(bindparam("limit"))
    .with_for_update(skip_locked=True),
}
_EXPIRED = {
    backend: select(*_JOB_COLUMNS).where(jobs.c.id.in_(ids)).order_by(jobs.c.lease_expires_at)
    for backend, ids in _EXPIRED_IDS.items()
}
TypeLeases = tuple[tuple[str, int], ...]


@lru_cache(maxsize=64)
def _claim_statement(backend: str, type_leases: TypeLeases) -> Any:
    """The claim UPDATE, built once per backend and per-type lease table (the hottest
    statement of all). Per-type leases are a CASE on the job's type."""
    lease: Any = bindparam("lease")
    expires: Any = bindparam("expires", type_=UTCDateTime())
    if type_leases:
        lease = case(
            *((jobs.c.type == literal(name), literal(seconds)) for name, seconds in type_leases),
            else_=lease,
        )
        expires = case(
            *(
                (jobs.c.type == literal(name), bindparam(f"expires_{i}", type_=UTCDateTime()))
                for i, (name, _) in enumerate(type_leases)
            ),
            else_=expires,
        )
    return (
        update(jobs)
        .where(jobs.c.id == _CLAIM_HEAD[backend].scalar_subquery(), _PENDING)
        .values(
            status=literal_column("'running'"),
            worker_id=bindparam("worker"),
            attempts=jobs.c.attempts + 1,
            claimed_at=_now(),
            lease_expires_at=expires,
            lease_seconds=lease,
            progress=None,
            progress_message=None,
            updated_at=_now(),
        )
        .returning(*_JOB_COLUMNS)
    )


def claim_next(
    conn: Connection,
    *,
    worker: str,
    now: datetime,
    lease_seconds: int,
    type_leases: TypeLeases = (),
) -> Job | None:
    """Move the head of the queue to running for ``worker`` in one compare-and-set statement.

    The lease is ``lease_seconds``, or the job type's entry in ``type_leases`` when it has one.
    """
    params: dict[str, Any] = {
        "worker": worker,
        "now": now,
        "lease": lease_seconds,
        "expires": now + timedelta(seconds=lease_seconds),
    }
    for i, (_, seconds) in enumerate(type_leases):
        params[f"expires_{i}"] = now + timedelta(seconds=seconds)
    statement = _claim_statement(conn.dialect.name, type_leases)
    row = conn.execute(statement, params).first()
    return Job.from_row(row._mapping) if row else None


def lease_expired_before(now: datetime) -> ColumnElement[bool]:
    """The condition of a lease that ended before ``now``."""
    return jobs.c.lease_expires_at < now


def expired_leases(conn: Connection, now: datetime, limit: int) -> list[Job]:
    """Running jobs whose lease ended before ``now``, oldest first."""
    rows = conn.execute(_EXPIRED[conn.dialect.name], {"now": now, "limit": limit})
    return [Job.from_row(row._mapping) for row in rows]


def transition(
    conn: Connection,
    job_id: int,
    *,
    expect: Mapping[str, Any],
    statuses: Iterable[str],
    values: Mapping[str, Any],
    extra: Sequence[ColumnElement[bool]] = (),
) -> Job | None:
    """Compare-and-set: update the job only if its status and ``expect`` columns still match."""
    conditions = [jobs.c.id == job_id, jobs.c.status.in_(list(statuses)), *extra]
    conditions += [jobs.c[name] == value for name, value in expect.items()]
    row = conn.execute(
        update(jobs).where(*conditions).values(**values).returning(*_JOB_COLUMNS)
    ).first()
    if row is not None and values.get("status") == JobStatus.PENDING:
        conn.info[JOB_DUE] = True
    return Job.from_row(row._mapping) if row else None


def record_event(
    conn: Connection,
    *,
    job: Job,
    at: datetime,
    from_status: str | None,
    kind: str,
    actor: str | None,
    error: str | None = None,
    note: str | None = None,
) -> None:
    """Append the transition that brought ``job`` to its current status."""
    conn.execute(
        _INSERT_EVENT,
        {
            "job_id": job.id,
            "at": at,
            "from_status": from_status,
            "to_status": job.status,
            "actor": actor,
            "attempt": job.attempts or None,
            "kind": kind,
            "error": error,
            "note": note,
        },
    )


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


def count_by(conn: Connection, column: str, visible: ColumnElement[bool] | None) -> dict[Any, int]:
    """Job counts grouped by ``status`` or ``priority``, read from a covering index."""
    col = jobs.c[column]
    query = select(col, func.count()).group_by(col)
    if visible is not None:
        query = query.where(visible)
    return {key: count for key, count in conn.execute(query).all()}


def oldest_pending_run_at(
    conn: Connection, now: datetime, visible: ColumnElement[bool] | None
) -> datetime | None:
    """When the longest-waiting claimable job became due (one probe of ix_jobs_pending)."""
    query = select(func.min(jobs.c.run_at)).where(_PENDING, jobs.c.run_at <= now)
    if visible is not None:
        query = query.where(visible)
    return conn.execute(query).scalar()


def _minute(conn: Connection) -> Any:
    """An event's time truncated to the minute, in the backend's own SQL."""
    if conn.dialect.name == "postgresql":
        minute = func.date_trunc("minute", job_events.c.at)
    else:
        minute = func.strftime("%Y-%m-%d %H:%M:00.000000", job_events.c.at)
    return type_coerce(minute, UTCDateTime())


def finished_per_minute(
    conn: Connection, since: datetime, visible: ColumnElement[bool] | None
) -> list[tuple[datetime, str, int]]:
    """``(minute, status, count)`` of completions and final failures since ``since``."""
    minute = _minute(conn).label("minute")
    query = (
        select(minute, job_events.c.to_status, func.count())
        .where(
            job_events.c.to_status.in_([JobStatus.COMPLETED, JobStatus.FAILED]),
            job_events.c.at >= since,
        )
        .group_by(minute, job_events.c.to_status)
    )
    if visible is not None:
        query = query.where(job_events.c.job_id.in_(select(jobs.c.id).where(visible)))
    return [(at, status, count) for at, status, count in conn.execute(query).all()]


def latest_failures(conn: Connection, limit: int) -> list[Job]:
    """The most recently failed jobs."""
    query = (
        select(*_JOB_COLUMNS)
        .where(jobs.c.status == literal_column("'failed'"))
        .order_by(jobs.c.finished_at.desc())
        .limit(limit)
    )
    return [Job.from_row(row._mapping) for row in conn.execute(query)]
