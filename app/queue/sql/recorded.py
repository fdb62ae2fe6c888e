"""On PostgreSQL the hot statements that add or move jobs (a batch's enqueue, a claim, a batch
of reports, a heartbeat) write the jobs' events and the figures the database keeps in the same
statement, as data-modifying CTEs over the jobs they return: once per statement, with no second
statement sent for the events.

The counters' statement triggers (migration 0011) read any statement's jobs back from its
transition tables, join the old rows to the new and run four statements per move, and the
events' trigger one more. They stay for every other statement. A statement built here sets
the transaction's flags ``queuelog.jobs_counted`` and ``queuelog.events_counted`` as it returns
its rows; the triggers firing at its end clear them and count nothing (migration 0020), so each
move is counted once. What is written here is what the triggers write, for moves whose old
status and holder the statement itself names: ``job_counts`` per scope, the holder rows of
``job_holders``, the finishes of ``finished_per_minute`` and the worker's ``worker_activity``.

SQLite keeps its row triggers: there a move stays a plain UPDATE and its events one more INSERT.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Insert,
    Integer,
    Select,
    String,
    Update,
    and_,
    any_,
    case,
    cast,
    exists,
    extract,
    func,
    literal_column,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.selectable import CTE

from app.queue.vocabulary.states import EDGES, EventKind, JobStatus
from app.storage.schema import job_events
from app.storage.schema_figures import (
    finished_per_minute,
    job_counts,
    job_holders,
    worker_activity,
)

_STATUSES = [status.value for status in JobStatus]
_FINISHED = (JobStatus.COMPLETED, JobStatus.FAILED)  # the finishes counted per minute
_FINISHING = {arrow.kind for arrow in EDGES.values() if arrow.target in _FINISHED}
_ACTIVE = (EventKind.CLAIMED, EventKind.COMPLETED, EventKind.FAILED)  # a worker's activity
JOBS_FLAG = "queuelog.jobs_counted"  # cleared by the jobs' UPDATE trigger (migration 0020)
EVENTS_FLAG = "queuelog.events_counted"  # cleared by the events' INSERT trigger


@dataclass(frozen=True)
class Record:
    """What a statement moving jobs writes besides them: the status every job leaves
    (``source``; None: an INSERT of new jobs); who held them, when that was running
    (``holder``, SQL); the instant (``at``, SQL, the jobs' ``updated_at``; None: each new job's
    ``created_at``); their event, if any (``kind``; None: a heartbeat, which moves no job to
    another status), with its ``actor``, ``error`` and ``note`` (SQL: a parameter, an item's
    value returned by the statement, or None for NULL)."""

    source: JobStatus | None
    at: Any
    holder: Any = None
    kind: EventKind | None = None
    actor: Any = None
    error: Any = None
    note: Any = None


def recorded(
    statement: Update | Insert, returned: Sequence[Any], record: Record, order: Sequence[str]
) -> Any:
    """``statement`` (an UPDATE of jobs, or an INSERT of new ones) returning ``returned`` in
    ``order`` (names of them), with its jobs' events and figures written by the same
    statement."""
    if record.source == JobStatus.RUNNING and record.holder is None:
        raise ValueError("a move of running jobs must name their holder to count them")
    extra = [_sql(record.error).label("event_error"), _sql(record.note).label("event_note")]
    flagged = _flag(JOBS_FLAG).label("flagged")
    moved = statement.returning(*returned, *extra, flagged).cte("moved")
    ctes = _writes(moved, record) if record.kind is not None else []
    names = [column.name for column in returned]
    query = select(*(moved.c[name] for name in names)).add_cte(*ctes)
    return query.order_by(*(moved.c[name] for name in order))


def _writes(moved: CTE, record: Record) -> list[CTE]:
    """The CTEs that write the moved jobs' events and figures."""
    shard = select(func.queuelog_counter_shard().label("n")).cte("shard")
    if record.source is None:  # new jobs: held by nobody yet
        return [_events(moved, record).cte("events"), _added(moved, shard).cte("counted")]
    held = (
        select(job_holders.c.worker, job_holders.c.job_id)
        .where(job_holders.c.job_id == any_(func.array(select(moved.c.id).scalar_subquery())))
        .cte("held")
    )
    writes = [
        _events(moved, record).cte("events"),
        _counts(moved, held, shard, record).cte("counted"),
        _holders(moved, held, record).cte("holders"),
    ]
    if record.kind in _FINISHING:
        writes.append(_finished(moved, held, shard, record).cte("finished"))
    if record.kind in _ACTIVE and record.actor is not None:
        writes.append(_activity(moved, shard, record).cte("activity"))
    return writes


def _sql(value: Any) -> Any:
    return literal_column("NULL", String()) if value is None else value


def _text(value: str) -> ColumnElement[str]:
    return literal_column(f"'{value}'", String())


def _flag(name: str) -> ColumnElement[str]:
    """Set a transaction-local flag (evaluated for each row the statement returns)."""
    return func.set_config(_text(name), _text("yes"), literal_column("true"))


def _scope(prefix: str, name: Any) -> ColumnElement[str]:
    return _text(prefix).op("||")(name)


def _moving(moved: CTE, record: Record) -> ColumnElement[bool]:
    """The jobs of the statement that changed status (every new job)."""
    if record.source is None:
        return true()
    return moved.c.status != _text(record.source)


def _events(moved: CTE, record: Record) -> Any:
    """One event per moved job, in the order of their ids."""
    m = moved.c
    rows = select(
        m.id,
        m.created_at if record.at is None else record.at,
        _sql(None if record.source is None else _text(record.source)),
        m.status,
        _sql(record.actor),
        func.nullif(m.attempts, _number(0)),
        _text(str(record.kind)),
        m.event_error,
        m.event_note,
    ).where(_moving(moved, record))
    columns = ["job_id", "at", "from_status", "to_status", "actor", "attempt", "kind", "error"]
    return (
        job_events.insert()
        .from_select([*columns, "note"], rows.order_by(m.id))
        .returning(_flag(EVENTS_FLAG))
    )


def _deltas(arrived: ColumnElement[Any], left: str | None) -> list[ColumnElement[Any]]:
    """Per status column, +1 for a job arriving in status ``arrived`` (SQL) and -1 for one
    leaving status ``left`` (None: a new job, or one counted for a scope it was not in)."""
    return [
        (cast(arrived == _text(name), Integer) - _number(1 if left == name else 0)).label(name)
        for name in _STATUSES
    ]


def _number(n: int) -> ColumnElement[int]:
    return literal_column(str(n), Integer())


def _running(n: int) -> list[ColumnElement[Any]]:
    return [_number(n if name == JobStatus.RUNNING else 0).label(name) for name in _STATUSES]


def _upsert_counts(rows: list[Select[Any]], shard: CTE) -> Any:
    """Sum ``rows`` (scope, type, priority and a delta per status) per counter row into
    ``job_counts``, in the transaction's shard."""
    scoped = union_all(*rows).subquery("scoped")
    keys = [scoped.c.scope, scoped.c.type, scoped.c.priority]
    sums = [func.sum(scoped.c[name]) for name in _STATUSES]
    summed = select(*keys, shard.c.n, *sums).group_by(*keys, shard.c.n)
    upsert = postgresql.insert(job_counts).from_select(
        ["scope", "type", "priority", "shard", *_STATUSES], summed
    )
    return upsert.on_conflict_do_update(
        index_elements=["scope", "type", "priority", "shard"],
        set_={name: job_counts.c[name] + upsert.excluded[name] for name in _STATUSES},
    )


def _added(added: CTE, shard: CTE) -> Any:
    """``job_counts`` of new jobs: everyone's and their owner's."""
    a = added.c
    return _upsert_counts(
        [
            select(_text("*").label("scope"), a.type, a.priority, *_deltas(a.status, None)),
            select(_scope("owner:", a.created_by), a.type, a.priority, *_deltas(a.status, None)),
        ],
        shard,
    )


def _counts(moved: CTE, held: CTE, shard: CTE, record: Record) -> Any:
    """``job_counts``: everyone's, the owner's, each earlier holder's and the new holder's
    jobs, and the jobs running for a worker, summed per counter row and upserted."""
    m, h = moved.c, held.c
    moving, source = _moving(moved, record), record.source
    running = m.status == _text(JobStatus.RUNNING)
    first_hold = ~exists().where(h.worker == m.worker_id, h.job_id == m.id)

    def row(scope: ColumnElement[str], deltas: list[ColumnElement[Any]]) -> Select[Any]:
        return select(scope.label("scope"), m.type, m.priority, *deltas)

    rows = [
        row(_text("*"), _deltas(m.status, source)).where(moving),
        row(_scope("owner:", m.created_by), _deltas(m.status, source)).where(moving),
        row(_scope("holder:", h.worker), _deltas(m.status, source))
        .join_from(moved, held, h.job_id == m.id)
        .where(moving),
        row(_scope("holder:", m.worker_id), _deltas(m.status, None)).where(
            moving, running, first_hold
        ),
        row(_scope("worker:", m.worker_id), _running(1)).where(moving, running),
    ]
    if source == JobStatus.RUNNING:
        rows.append(row(_scope("worker:", record.holder), _running(-1)).where(moving))
    return _upsert_counts(rows, shard)


def _holders(moved: CTE, held: CTE, record: Record) -> Any:
    """``job_holders``: every holder row of a moved job takes its new status and run_at; a
    worker claiming a job it never held becomes one of its holders."""
    m, h = moved.c, held.c
    moving = _moving(moved, record)
    earlier = select(h.worker, m.id, m.status, m.run_at).join_from(moved, held, h.job_id == m.id)
    first = select(m.worker_id, m.id, m.status, m.run_at).where(
        m.status == _text(JobStatus.RUNNING),
        ~exists().where(h.worker == m.worker_id, h.job_id == m.id),
    )
    rows = union_all(earlier.where(moving), first.where(moving))
    upsert = postgresql.insert(job_holders).from_select(
        ["worker", "job_id", "status", "run_at"], rows
    )
    return upsert.on_conflict_do_update(
        index_elements=["worker", "job_id"],
        set_={"status": upsert.excluded.status, "run_at": upsert.excluded.run_at},
    )


def _minute(at: Any) -> tuple[Any, Any]:
    """The ring's minute and slot (its minute of the hour) of the instant ``at``."""
    return func.date_trunc(_text("minute"), at), cast(extract("minute", at), Integer)


def _ring(table: Any, keys: list[str], rows: Select[Any], last_at: bool = False) -> Any:
    """Upsert ``rows`` (``keys``, slot, shard, minute, n[, last_at]) into a ring of minute
    slots: a newer minute restarts its slot, the same minute adds to it, an older one is
    outside every window (migration 0009's rule)."""
    columns = [*keys, "slot", "shard", "minute", "n", *(["last_at"] if last_at else [])]
    upsert = postgresql.insert(table).from_select(columns, rows)
    new, old = upsert.excluded, table.c
    newer, same = new.minute > old.minute, new.minute == old.minute
    changes = {
        "n": case((newer, new.n), (same, old.n + new.n), else_=old.n),
        "minute": case((newer, new.minute), else_=old.minute),
    }
    if last_at:
        later = newer | (same & (new.last_at > old.last_at))
        changes["last_at"] = case((later, new.last_at), else_=old.last_at)
    return upsert.on_conflict_do_update(index_elements=[*keys, "slot", "shard"], set_=changes)


def _finished(moved: CTE, held: CTE, shard: CTE, record: Record) -> Any:
    """``finished_per_minute``: the completions and final failures of everyone's, the
    owner's and each holder's jobs in the statement's minute."""
    m, h = moved.c, held.c
    done = and_(_moving(moved, record), m.status.in_([_text(s) for s in _FINISHED]))
    scopes = union_all(
        select(_text("*").label("scope"), m.status).where(done),
        select(_scope("owner:", m.created_by), m.status).where(done),
        select(_scope("holder:", h.worker), m.status)
        .join_from(moved, held, h.job_id == m.id)
        .where(done),
    ).subquery("finishes")
    minute, slot = _minute(record.at)
    rows = select(scopes.c.scope, scopes.c.status, slot, shard.c.n, minute, func.count()).group_by(
        scopes.c.scope, scopes.c.status, shard.c.n
    )
    return _ring(finished_per_minute, ["scope", "status"], rows)


def _activity(moved: CTE, shard: CTE, record: Record) -> Any:
    """``worker_activity``: the actor's events of this kind in the statement's minute."""
    minute, slot = _minute(record.at)
    kind = _text(str(record.kind))
    rows = (
        select(record.actor, kind, slot, shard.c.n, minute, func.count(), record.at)
        .select_from(moved)
        .where(_moving(moved, record))
        .group_by(shard.c.n)
    )
    return _ring(worker_activity, ["worker", "kind"], rows, last_at=True)
