"""SQL on jobs and job events: inserts, reads, listings and figures. The UPDATEs that
move a job between states live in ``app.queue.sql.edges``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    String,
    and_,
    bindparam,
    func,
    insert,
    literal_column,
    select,
    union_all,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql import Select
from sqlalchemy.sql.elements import BindParameter

from app.queue.sql import rows as rows_sql
from app.queue.sql.counts import EVERYONE
from app.queue.sql.filters import filter_conditions, search_as_id
from app.queue.sql.prepared import Prepared
from app.queue.vocabulary.jobs import Event, Job, JobFilters
from app.queue.vocabulary.states import PRIORITIES, EventKind
from app.storage.schema import JOB_KEY, job_events, jobs
from app.storage.schema_figures import job_holders
from app.storage.sqltypes import UTCDateTime

JOB_COLUMNS = [JOB_KEY if f == "idempotency_key" else jobs.c[f] for f in Job.__dataclass_fields__]
EVENT_COLUMNS = [job_events.c[name] for name in Event.__dataclass_fields__]


def job_of(row: Sequence[Any]) -> Job:
    """A job from a row of ``JOB_COLUMNS``."""
    return Job.from_values(row)


@lru_cache(maxsize=16)
def _insert_job(columns: tuple[str, ...]) -> Prepared:
    """The job INSERT of one set of columns (what an enqueue sets; the rest are defaults)."""
    values = {name: bindparam(name, type_=jobs.c[name].type) for name in columns}
    return Prepared(insert(jobs).values(values).returning(*JOB_COLUMNS))


_SELECT_JOB = select(*JOB_COLUMNS).where(jobs.c.id == bindparam("job_id"))
_GET_JOB = Prepared(_SELECT_JOB)
_INSERT_EVENT = Prepared(
    insert(job_events).values(
        {
            name: bindparam(name, type_=job_events.c[name].type)
            for name in Event.__dataclass_fields__
            if name != "id"
        }
    )
)
_BY_IDEMPOTENCY_KEY = Prepared(
    select(*JOB_COLUMNS).where(
        jobs.c.created_by == bindparam("owner_id"), jobs.c.idempotency_key == bindparam("key")
    )
)
_EVENTS = Prepared(
    select(*EVENT_COLUMNS)
    .where(job_events.c.job_id == bindparam("job_id"))
    .order_by(job_events.c.id)
)


def insert_job(conn: Connection, values: Mapping[str, Any], *, actor: str) -> Job | None:
    """Insert a job and its ``enqueued`` event; None when its idempotency key is taken."""
    statement = _insert_job(tuple(sorted(values)))
    if values.get("idempotency_key") is None and values.get("child_key") is None:  # no savepoint
        row = statement.row(conn, values)
    else:
        try:
            with conn.begin_nested():
                row = statement.row(conn, values)
        except IntegrityError:
            return None
    assert row is not None  # INSERT ... RETURNING
    job = job_of(row)
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
    append_events(conn, [event_row(**event)])


def append_events(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Append many ``event_row`` rows (a claim of many jobs) in one statement."""
    if len(rows) == 1:
        _INSERT_EVENT.run(conn, rows[0])
    else:
        rows_sql.insert_events(conn, rows)


def find_by_idempotency_key(conn: Connection, owner_id: int, key: str) -> Job | None:
    """The job ``owner_id`` enqueued with ``key``, if any."""
    row = _BY_IDEMPOTENCY_KEY.row(conn, {"owner_id": owner_id, "key": key})
    return job_of(row) if row else None


def get_job(conn: Connection, job_id: int) -> Job | None:
    """One job by id."""
    row = _GET_JOB.row(conn, {"job_id": job_id})
    return job_of(row) if row else None


def visible_to_worker(name: str | BindParameter[str]) -> ColumnElement[bool]:
    """Jobs a worker holds now or held in any earlier attempt."""
    # Every claim makes the worker one of the job's holders (a trigger, migration 0009): one
    # probe of job_holders' primary key per job.
    held = select(job_holders.c.job_id).where(
        job_holders.c.worker == name, job_holders.c.job_id == jobs.c.id
    )
    return held.exists()


def visible_to_owner(user_id: int | BindParameter[int]) -> ColumnElement[bool]:
    """Jobs a producer enqueued."""
    return jobs.c.created_by == user_id


@dataclass(frozen=True)
class Viewer:
    """Whose jobs a read may return: those a producer enqueued (``owner``, a user id), those a
    worker holds or held (``holder``, its name), or everyone's (neither)."""

    owner: int | None = None
    holder: str | None = None

    @property
    def kind(self) -> str:
        """``owner``, ``holder`` or ``all``: which rule applies."""
        if self.owner is not None:
            return "owner"
        return "all" if self.holder is None else "holder"

    def condition(self) -> ColumnElement[bool] | None:
        """The rule as a condition on ``jobs`` (None: every job)."""
        if self.owner is not None:
            return visible_to_owner(self.owner)
        return None if self.holder is None else visible_to_worker(self.holder)

    @property
    def value(self) -> int | str | None:
        """The parameter of the rule: the owner's id or the holder's name."""
        return self.owner if self.owner is not None else self.holder

    @property
    def counts_scope(self) -> str:
        """The scope of the figures the database keeps of these jobs (migration 0009):
        ``*`` (everyone's), ``owner:<user id>`` or ``holder:<worker name>``."""
        return EVERYONE if self.kind == "all" else f"{self.kind}:{self.value}"


# The rules with the viewer as the parameter ``viewer``, for the prebuilt reads.
_VIEWER_RULES: dict[str, ColumnElement[bool] | None] = {
    "owner": visible_to_owner(bindparam("viewer", type_=Integer())),
    "holder": visible_to_worker(bindparam("viewer", type_=String())),
    "all": None,
}
_GET_VISIBLE = {
    kind: Prepared(_SELECT_JOB if rule is None else _SELECT_JOB.where(rule))
    for kind, rule in _VIEWER_RULES.items()
}


def get_visible_job(conn: Connection, job_id: int, viewer: Viewer) -> Job | None:
    """One job by id, if ``viewer`` may see it."""
    row = _GET_VISIBLE[viewer.kind].row(conn, {"job_id": job_id, "viewer": viewer.value})
    return job_of(row) if row else None


ListShape = tuple[str, bool, bool, bool, int, bool, bool, bool, bool, str]


# A worker's jobs through its holder rows (ordered by the holder's job_id: the planner does not
# carry an ORDER BY over the join's equality).
_HELD = job_holders.join(jobs, jobs.c.id == job_holders.c.job_id)


@lru_cache(maxsize=256)
def _list_statement(shape: ListShape) -> Prepared:
    """The page query of one shape: viewer rule, filters set, how many ways the search matches
    (0: none, 1: idempotency key, 2: key or id), the cursor's side, the walk's direction, the
    partition filter and the payload search ("": none; not cached). A worker's page walks its
    holder rows (by their index) rather than every job, its range on both sides of the join,
    where a merge join starts."""
    kind, status, job_type, priority, search, before, after, rising, partition, payload = shape
    held = kind == "holder"
    key = job_holders.c.job_id if held else jobs.c.id
    ranged = [jobs.c.id, key] if held else [jobs.c.id]
    rule = (
        job_holders.c.worker == bindparam("viewer", type_=String()) if held else _VIEWER_RULES[kind]
    )
    conditions = [] if rule is None else [rule]
    conditions += filter_conditions(
        status_column=job_holders.c.status if held else jobs.c.status,
        status=bindparam("status") if status else None,
        job_type=bindparam("type") if job_type else None,
        priority=bindparam("priority") if priority else None,
        search=bindparam("search") if search else None,
        search_id=bindparam("search_id") if search == 2 else None,
        partition=bindparam("partition") if partition else None,
        payload=payload or None,
    )
    if before:
        conditions += [column < bindparam("before_id") for column in ranged]
    if after:
        conditions += [column > bindparam("after_id") for column in ranged]
    query = (
        select(*JOB_COLUMNS)
        .where(and_(True, *conditions))
        .order_by(key.asc() if rising else key.desc())
        .limit(bindparam("limit"))
    )
    return Prepared(query.select_from(_HELD) if held else query)


def list_jobs(conn: Connection, filters: JobFilters, viewer: Viewer) -> tuple[list[Job], bool]:
    """A page of jobs ``viewer`` may see in the order of creation (newest or oldest first),
    and whether more lie beyond it in the paging direction."""
    search = filters.search or ""
    search_id = search_as_id(search)
    shape: ListShape = (
        viewer.kind,
        bool(filters.status),
        bool(filters.type),
        filters.priority is not None,
        (1 if search_id is None else 2) if search else 0,
        filters.before_id is not None,
        filters.after_id is not None,
        filters.rising,
        filters.partition is not None,
        filters.payload or "",
    )
    statement = (_list_statement.__wrapped__ if filters.payload else _list_statement)(shape)
    params = {
        "viewer": viewer.value,
        "status": filters.status,
        "type": filters.type,
        "priority": filters.priority,
        "search": search,
        "search_id": search_id or 0,
        "partition": filters.partition,
        "before_id": filters.before_id,
        "after_id": filters.after_id,
        "limit": filters.limit + 1,
    }
    found = [job_of(row) for row in statement.rows(conn, params)]
    more = len(found) > filters.limit
    page = found[: filters.limit]
    return (page[::-1] if filters.rising == filters.sort.descending else page), more


# Claimable: pending and waiting for no parent. Literal, as the claim's partial indexes say it
# (app.storage.schema.CLAIMABLE): a partial index serves only a query naming its terms.
PENDING = and_(jobs.c.status == literal_column("'pending'"), jobs.c.waiting_for.is_(None))


def list_events(conn: Connection, job_id: int) -> list[Event]:
    """A job's transitions, oldest first."""
    return [Event(*row) for row in _EVENTS.rows(conn, {"job_id": job_id})]


def earliest_pending_run_at(*conditions: ColumnElement[bool]) -> Select[Any]:
    """The earliest ``run_at`` of the pending jobs meeting ``conditions``: per priority, the
    first entry of ix_jobs_claim that meets them (it orders each priority's jobs by ``run_at``).
    No index keeps the run_at of pending jobs alone: every enqueue and every claim would write
    to it."""
    per_priority = [
        select(
            select(jobs.c.run_at)
            .where(PENDING, jobs.c.priority == priority, *conditions)
            .order_by(jobs.c.run_at)
            .limit(1)
            .scalar_subquery()
            .label("run_at")
        )
        for priority in sorted(PRIORITIES.values(), reverse=True)
    ]
    earliest = union_all(*per_priority).subquery()
    return select(func.min(earliest.c.run_at).label("instant"))


_OLDEST_DUE = earliest_pending_run_at(jobs.c.run_at <= bindparam("now", type_=UTCDateTime()))


def oldest_pending_run_at(
    conn: Connection, now: datetime, visible: ColumnElement[bool] | None
) -> datetime | None:
    """When the longest-waiting claimable job became due (``earliest_pending_run_at``, or one
    probe of ix_jobs_owner_status_run_at for an owner)."""
    if visible is None:
        found: datetime | None = conn.execute(_OLDEST_DUE, {"now": now}).scalar()
        return found
    query = select(func.min(jobs.c.run_at)).where(PENDING, jobs.c.run_at <= now, visible)
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
    """The most recently failed jobs (a failed job is finished: the partial index of finished
    jobs serves a query that says so)."""
    query = (
        select(*JOB_COLUMNS)
        .where(jobs.c.status == literal_column("'failed'"), jobs.c.finished_at.is_not(None))
        .order_by(jobs.c.finished_at.desc())
        .limit(limit)
    )
    return [job_of(row) for row in conn.execute(query)]
