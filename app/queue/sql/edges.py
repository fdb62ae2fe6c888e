"""The SQL that moves jobs between states: each change is one compare-and-set UPDATE whose WHERE
clause names the states and holder it expects (a lost race updates nothing), plus its event."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Literal, TypedDict

from sqlalchemy import (
    Boolean,
    ColumnElement,
    Connection,
    bindparam,
    case,
    exists,
    literal,
    literal_column,
    select,
    update,
)

from app.queue.sql import dialects
from app.queue.sql import partitions as partitions_sql
from app.queue.sql.dialects import Dialect
from app.queue.sql.items import Columns, Kind, parameter
from app.queue.sql.jobs import (
    JOB_COLUMNS,
    append_event,
    append_events,
    event_row,
    job_of,
)
from app.queue.sql.prepared import Prepared
from app.queue.sql.recorded import Record, recorded
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import EventKind, JobStatus
from app.storage.schema import jobs
from app.storage.schema_partitions import NULL_PARTITION
from app.storage.sqltypes import UTCDateTime


class Expected(TypedDict, total=False):
    """What a compare-and-set expects of the job besides its status: its holder, attempt,
    retry count and run time, as the caller read them (a key left out is not compared)."""

    worker_id: str | None
    attempts: int
    retry_count: int
    run_at: datetime


def _now() -> Any:
    return bindparam("now", type_=UTCDateTime())


def _listed(statuses: Collection[str]) -> str:
    """The statuses as SQL literals: one (``= 'x'``, which partial indexes on it serve) or a
    list (`` IN ('x', 'y')``)."""
    names = ", ".join(f"'{JobStatus(name)}'" for name in sorted(statuses))
    return f" IN ({names})" if len(statuses) > 1 else f" = {names}"


def status_in(statuses: Collection[str]) -> ColumnElement[bool]:
    """``jobs.status`` is one of ``statuses``."""
    return literal_column(f"jobs.status{_listed(statuses)}", Boolean())


# A claim's type condition: any type, only the listed types, or any but them (the types flow
# control holds back, see ``claiming``); or the jobs a fair walk picked (``partitions``).
TypeFilter = Literal["any", "only", "except", "picked"]
_TYPES = {"any": "", "only": " AND type IN ({listed})", "except": " AND type NOT IN ({listed})"}
_DUE = " AND waiting_for IS NULL AND run_at <= :now"  # after the claim's status
_CLAIM_ORDER = "priority DESC, run_at, id"


def _claim_head(
    dialect: Dialect, sources: frozenset[str], type_filter: TypeFilter, count: int
) -> Any:
    """The ids of the next ``:limit`` due jobs in ``sources`` (of the ``count`` listed types, or
    not of them), in claim order. One parameter per listed type (``type_0``...): a statement
    per list length, not an expanding parameter, so it is compiled once. The partial index is
    walked in claim order and a type condition checked on the way."""
    if type_filter == "picked":
        return _picked(dialect, sources)
    listed = ", ".join(f":type_{i}" for i in range(count))
    where = "status" + _listed(sources) + _DUE + _TYPES[type_filter].format(listed=listed)
    names: list[Any] = [bindparam(f"type_{i}") for i in range(count)]
    return dialect.head("ix_jobs_claim", where, _CLAIM_ORDER, _now(), *names)


_PICKED: Columns = (("job_id", Kind.BIGINT),)
SPARE = 4  # candidates a fair claim picks beyond what it wants


def _picked(dialect: Dialect, sources: frozenset[str]) -> Any:
    """The first ``:limit`` of the ids in ``:items`` (the jobs a fair walk picked, in turn
    order) still in ``sources``, due and waiting for no parent; where claims run at once,
    those another claim holds are passed over, as the plain claim's head does."""
    items = dialect.items(_PICKED, "picked")
    taken = (
        select(jobs.c.id)
        .select_from(items.join(jobs, jobs.c.id == items.c.job_id))
        .where(status_in(sources), jobs.c.waiting_for.is_(None), jobs.c.run_at <= _now())
        .order_by(items.c.position)
        .limit(bindparam("limit"))
    )
    return dialect.skip_locked(taken)


# Every claim first looks for expired leases: prebuilt, like the claim itself.
_EXPIRED = {
    dialect: Prepared(
        select(*JOB_COLUMNS)
        .where(
            dialect.among(
                jobs.c.id,
                dialect.head(
                    "ix_jobs_lease",
                    "status = 'running' AND lease_expires_at < :now",
                    "lease_expires_at",
                    _now(),
                ),
            )
        )
        .order_by(jobs.c.lease_expires_at)
    )
    for dialect in dialects.DIALECTS.values()
}
# Running attempts past their deadlines: the running jobs' partial index, then the deadline
# checked on the way (few jobs run at once, and no claim pays for another index).
_OVERDUE = {
    dialect: Prepared(
        select(*JOB_COLUMNS).where(
            dialect.among(
                jobs.c.id,
                dialect.head(
                    "ix_jobs_lease",
                    "status = 'running' AND deadline_at <= :now",
                    "lease_expires_at",
                    _now(),
                ),
            )
        )
    )
    for dialect in dialects.DIALECTS.values()
}
TypeLeases = tuple[tuple[str, int], ...]


@lru_cache(maxsize=64)
def _claim_statement(
    dialect: Dialect,
    sources: frozenset[str],
    type_leases: TypeLeases,
    type_filter: TypeFilter,
    count: int,
    timed_types: tuple[str, ...],
    kind: EventKind,
) -> Prepared:
    """The claim UPDATE of up to ``:limit`` jobs, built once per backend, per-type lease table,
    number of named types and types with a run-time limit (the hottest statement of all).
    Per-type leases and deadlines are a CASE on the job's type. Where the dialect records its
    moves, the statement also writes the jobs' ``kind`` events and figures."""
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
    deadline: Any = literal_column("NULL")
    if timed_types:
        deadline = case(
            *(
                (jobs.c.type == literal(name), bindparam(f"deadline_{i}", type_=UTCDateTime()))
                for i, name in enumerate(timed_types)
            ),
            else_=deadline,
        )
    claim = (
        update(jobs)
        # The head reads only jobs in ``sources`` and holds them (locked on PostgreSQL, inside
        # the one writer on SQLite): the compare-and-set is the head's, not restated here.
        .where(dialect.among(jobs.c.id, _claim_head(dialect, sources, type_filter, count)))
        .values(
            status=literal_column("'running'"),
            worker_id=bindparam("worker"),
            attempts=jobs.c.attempts + 1,
            claimed_at=_now(),
            lease_expires_at=expires,
            lease_seconds=lease,
            deadline_at=deadline,
            progress=None,
            progress_message=None,
            updated_at=_now(),
        )
    )
    if not dialect.records_moves:
        return Prepared(claim.returning(*JOB_COLUMNS))
    (source,) = sources
    record = Record(JobStatus(source), _now(), kind=kind, actor=bindparam("worker"))
    return Prepared(recorded(claim, JOB_COLUMNS, record, order=["id"]))


def claim_due(
    conn: Connection,
    *,
    sources: frozenset[str],
    kind: EventKind,
    worker: str,
    now: datetime,
    lease_seconds: int,
    limit: int,
    types: tuple[str, ...] | None = None,
    type_leases: TypeLeases = (),
    except_types: tuple[str, ...] = (),
    run_limits: TypeLeases = (),
    fair: bool = False,
    picked: list[int] | None = None,
) -> list[Job]:
    """Move up to ``limit`` jobs from the head of the queue (of ``types`` when given, else of
    any type but ``except_types``) to running for ``worker`` in one compare-and-set statement,
    each with its own attempt and lease and its ``kind`` event. The lease is ``lease_seconds``,
    or the type's entry in ``type_leases``; the attempt's deadline is ``now`` plus the type's
    entry in ``run_limits`` (none for other types). ``fair``: partitioned jobs are claimable,
    so the head is taken in the partitions' turns (``partitions.fair_head``); ``picked``: the
    head is these jobs, in this order, those still claimable (a claim under partition limits
    picked them). The jobs come back in claim order."""
    params: dict[str, Any] = {
        "worker": worker,
        "now": now,
        "lease": lease_seconds,
        "expires": now + timedelta(seconds=lease_seconds),
        "limit": limit,
    }
    type_filter: TypeFilter = "any"
    listed: tuple[str, ...] = ()
    if types is not None:
        listed, type_filter = types, "only"
    elif except_types:
        listed, type_filter = except_types, "except"
    for i, name in enumerate(listed):
        params[f"type_{i}"] = name
    for i, (_, seconds) in enumerate(type_leases):
        params[f"expires_{i}"] = now + timedelta(seconds=seconds)
    for i, (_, seconds) in enumerate(run_limits):
        params[f"deadline_{i}"] = now + timedelta(seconds=seconds)
    timed = tuple(name for name, _ in run_limits)
    dialect = dialects.of(conn)
    turn: dict[int, int] = {}
    if fair and picked is None:
        # a few more than wanted: those another claim holds now are passed over
        picked = partitions_sql.fair_head(
            conn, want=limit + SPARE, now=now, type_filter=type_filter, listed=listed
        )
    if picked is not None:
        if not picked:
            return []
        turn = {job_id: index for index, job_id in enumerate(picked)}
        params["items"] = parameter(_PICKED, [{"job_id": job_id} for job_id in picked])
        type_filter, listed = "picked", ()
    statement = _claim_statement(
        dialect, sources, type_leases, type_filter, len(listed), timed, kind
    )
    claimed = [job_of(row) for row in statement.rows(conn, params)]
    # RETURNING has no order
    claimed.sort(key=lambda job: (-job.priority, turn.get(job.id, 0), job.run_at, job.id))
    if turn:  # each priority's turn moves to the partition of its last job
        served = {job.priority: job.partition or NULL_PARTITION for job in claimed}
        partitions_sql.move_cursors(conn, served, now)
    if not dialect.records_moves:
        append_events(
            conn,
            [
                event_row(job=job, at=now, from_status=JobStatus.PENDING, kind=kind, actor=worker)
                for job in claimed
            ],
        )
    return claimed


def expired_leases(conn: Connection, now: datetime, limit: int) -> list[Job]:
    """Running jobs whose lease ended before ``now``, oldest first."""
    rows = _EXPIRED[dialects.of(conn)].rows(conn, {"now": now, "limit": limit})
    return [job_of(row) for row in rows]


_ANY_OVERDUE = Prepared(
    select(
        exists().where(jobs.c.status == literal_column("'running'"), jobs.c.deadline_at <= _now())
    )
)


def any_overdue(conn: Connection, now: datetime) -> bool:
    """Whether a running attempt's deadline is ``now`` or earlier (no row is locked)."""
    row = _ANY_OVERDUE.row(conn, {"now": now})
    return bool(row and row[0])


def overdue_attempts(conn: Connection, now: datetime, limit: int) -> list[Job]:
    """Up to ``limit`` running jobs whose attempt's deadline is ``now`` or earlier."""
    rows = _OVERDUE[dialects.of(conn)].rows(conn, {"now": now, "limit": limit})
    return [job_of(row) for row in rows]


@lru_cache(maxsize=128)
def _move_statement(
    sources: frozenset[str], expect: tuple[str, ...], values: tuple[str, ...], lease_end: bool
) -> Prepared:
    """The compare-and-set UPDATE of one shape (its columns; the values are parameters), built
    once: finishing a batch of jobs runs it per job."""
    conditions = [jobs.c.id == bindparam("job_id"), status_in(sources)]
    conditions += [
        jobs.c[name] == bindparam(f"expect_{name}", type_=jobs.c[name].type) for name in expect
    ]
    if lease_end:
        conditions.append(
            jobs.c.lease_expires_at < bindparam("lease_ended_before", type_=UTCDateTime())
        )
    assignments = {name: bindparam(f"set_{name}", type_=jobs.c[name].type) for name in values}
    return Prepared(
        update(jobs)
        .where(*conditions)
        .values(**assignments, updated_at=bindparam("at", type_=UTCDateTime()))
        .returning(*JOB_COLUMNS)
    )


def move(
    conn: Connection,
    job_id: int,
    *,
    sources: Collection[str],
    expect: Expected,
    values: Mapping[str, Any],
    at: datetime,
    kind: EventKind | None,
    actor: str | None = None,
    error: str | None = None,
    note: str | None = None,
    lease_ended_before: datetime | None = None,
) -> Job | None:
    """Compare-and-set: update the job only if its status is one of ``sources`` and the
    ``expect`` columns still match, then append its ``kind`` event (None: no event, for a lease
    extension). None when the job was not in that state. An event names one "from" status, so
    an evented move from several states must be pinned to the one the caller read."""
    if kind is not None and len(sources) != 1:
        raise ValueError("pin an evented move to the one status it leaves")
    statement = _move_statement(
        frozenset(sources),
        tuple(sorted(expect)),
        tuple(sorted(values)),
        lease_ended_before is not None,
    )
    params = {f"expect_{name}": value for name, value in expect.items()}
    params |= {f"set_{name}": value for name, value in values.items()}
    params |= {"job_id": job_id, "at": at}
    if lease_ended_before is not None:
        params["lease_ended_before"] = lease_ended_before
    row = statement.row(conn, params)
    if row is None:
        return None
    job = job_of(row)
    if kind is not None:
        (from_status,) = sources
        append_event(
            conn,
            job=job,
            at=at,
            from_status=from_status,
            kind=kind,
            actor=actor,
            error=error,
            note=note,
        )
    return job
