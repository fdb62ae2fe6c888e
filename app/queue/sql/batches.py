"""SQL of the batch use cases: many jobs per statement (an enqueue or a finish of a hundred jobs
costs a few statements, not a few hundred). The per-job rules stay with their single use case."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    String,
    bindparam,
    literal_column,
    select,
    update,
)

from app.queue.sql import dialects
from app.queue.sql import rows as rows_sql
from app.queue.sql.dialects import Dialect
from app.queue.sql.items import Columns, Kind, parameter
from app.queue.sql.jobs import (
    JOB_COLUMNS,
    append_events,
    event_row,
    job_of,
)
from app.queue.sql.prepared import Prepared
from app.queue.sql.recorded import Record, recorded
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import EventKind, JobStatus
from app.storage.schema import jobs
from app.storage.sqltypes import UTCDateTime

# What an enqueue sets; the other columns take their defaults.
_NEW_JOB: Columns = (
    ("type", Kind.TEXT),
    ("payload", Kind.JSON),
    ("priority", Kind.INTEGER),
    ("max_retries", Kind.INTEGER),
    ("idempotency_key", Kind.TEXT),
    ("request_fingerprint", Kind.TEXT),
    ("created_by", Kind.INTEGER),
    ("run_at", Kind.TIMESTAMP),
    ("created_at", Kind.TIMESTAMP),
    ("updated_at", Kind.TIMESTAMP),
    ("unique_key", Kind.TEXT),
    ("secret_names", Kind.TEXT),
    ("secrets_sealed", Kind.TEXT),
    ("parent_id", Kind.BIGINT),
    ("child_key", Kind.TEXT),
    ("traceparent", Kind.TEXT),
    ("tracestate", Kind.TEXT),
    ("partition", Kind.TEXT),
)
# The columns every enqueue sets; the others are NULL for most jobs, and a batch's items carry
# only those some of its jobs set (the items' JSON is most of the database's parsing per job).
_ALWAYS = frozenset(
    {
        "type", "payload", "priority", "max_retries", "created_by",
        "run_at", "created_at", "updated_at",
    }
)  # fmt: skip


@lru_cache(maxsize=32)
def _insert_jobs(dialect: Dialect, columns: Columns) -> Prepared:
    """The INSERT of a batch's jobs, each item with ``columns``; where the dialect records its
    moves, it also writes their ``enqueued`` events (by ``:actor``) and figures."""
    insert = rows_sql.insert_rows(dialect, jobs, columns)
    if not dialect.records_moves:
        return Prepared(insert.returning(*JOB_COLUMNS))
    record = Record(None, None, kind=EventKind.ENQUEUED, actor=bindparam("actor", type_=String()))
    return Prepared(recorded(insert, JOB_COLUMNS, record, order=["id"]))


_BY_KEYS = select(*JOB_COLUMNS).where(
    jobs.c.created_by == bindparam("owner"),
    jobs.c.idempotency_key.in_(bindparam("keys", expanding=True)),
)


def jobs_by_idempotency_keys(conn: Connection, owner_id: int, keys: Collection[str]) -> list[Job]:
    """The jobs ``owner_id`` enqueued with any of ``keys`` (one indexed lookup per key)."""
    if not keys:
        return []
    rows = conn.execute(_BY_KEYS, {"owner": owner_id, "keys": list(keys)})
    return [job_of(row) for row in rows]


def insert_jobs(conn: Connection, rows: Sequence[Mapping[str, Any]], *, actor: str) -> list[Job]:
    """Insert ``rows`` and their ``enqueued`` events; the jobs come back in the rows' order.
    Raises ``IntegrityError`` when an idempotency key is taken (an owner's, or a parent's for
    a child): the caller's savepoint decides what then."""
    if not rows:
        return []
    # One statement assigns ids in the order of its rows, whatever order RETURNING uses.
    named = {name for row in rows for name, value in row.items() if value is not None}
    columns = tuple(column for column in _NEW_JOB if column[0] in _ALWAYS | named)
    items = [{name: row.get(name) for name, _ in columns} for row in rows]
    dialect = dialects.of(conn)
    params = {"items": parameter(columns, items), "actor": actor}
    result = _insert_jobs(dialect, columns).rows(conn, params)
    added = sorted((job_of(row) for row in result), key=lambda job: job.id)
    if dialect.records_moves:
        return added
    append_events(
        conn,
        [
            event_row(
                job=job, at=job.created_at, from_status=None, kind=EventKind.ENQUEUED, actor=actor
            )
            for job in added
        ],
    )
    return added


@lru_cache(maxsize=32)
def _move_statement(
    dialect: Dialect,
    sources: frozenset[str],
    shared: tuple[str, ...],
    columns: Columns,
    held: bool,
    kind: EventKind | None,
) -> tuple[Prepared, bool]:
    """The compare-and-set UPDATE of many jobs: each item names its job, the attempt and the
    ``expect_*`` columns it must still be at, and its own values of ``columns`` (``event_*``
    ones are its event's); ``shared`` values are the same for every job. ``held``: each job
    must be held by ``:worker``. With whether it writes the jobs' ``kind`` events and figures
    itself (where the dialect records its moves, for a move of one worker's jobs from one
    status; ``kind`` None: a move that writes no event, a heartbeat)."""
    item = dialect.items((*_KEYS, *columns))
    state: list[ColumnElement[bool]] = [
        dialect.led_by_items(jobs.c.status).in_(
            [literal_column(f"'{s}'") for s in sorted(sources)]
        ),
    ]
    if held:
        state.append(dialect.led_by_items(jobs.c.worker_id) == bindparam("worker"))
    expected = [
        jobs.c[name.removeprefix("expect_")] == item.c[name]
        for name, _ in columns
        if name.startswith("expect_")
    ]
    assignments: dict[str, Any] = {
        name: bindparam(f"set_{name}", type_=jobs.c[name].type) for name in shared
    }
    assignments |= {
        name: dialect.item_value(item, name, kind)
        for name, kind in columns
        if not name.startswith(("expect_", "event_"))
    }
    move = (
        update(jobs)
        .where(jobs.c.id == item.c.job_id, jobs.c.attempts == item.c.attempt, *state, *expected)
        .values(**assignments, updated_at=bindparam("at", type_=UTCDateTime()))
    )
    named = {name for name, _ in columns}
    # (a move of status or run_at without an event is not one of those: the triggers count it)
    moving = kind is not None or bool({"status", "run_at"} & (named | set(shared)))
    if not (dialect.records_moves and held and len(sources) == 1) or (moving and kind is None):
        return Prepared(move.returning(*JOB_COLUMNS)), False
    (source,) = sources
    record = Record(
        JobStatus(source),
        bindparam("at", type_=UTCDateTime()),
        holder=bindparam("worker"),
        kind=kind,
        # a time-out's event names no actor: the server failed the attempt
        actor=None if kind is EventKind.TIMED_OUT else bindparam("worker"),
        error=item.c.error if "error" in named else None,
        note=item.c.event_note if "event_note" in named else None,
    )
    return Prepared(recorded(move, JOB_COLUMNS, record, order=["id"])), True


_KEYS: Columns = (("job_id", Kind.BIGINT), ("attempt", Kind.INTEGER))


class Moved(NamedTuple):
    """The jobs a move took, by id, and whether it wrote their events (``move_many``)."""

    jobs: dict[int, Job]
    recorded: bool


def move_many(
    conn: Connection,
    items: Sequence[Mapping[str, Any]],
    *,
    sources: frozenset[str],
    worker: str | None,
    shared: Mapping[str, Any],
    columns: Columns = (),
    at: datetime,
    kind: EventKind | None = None,
) -> Moved:
    """Compare-and-set for many jobs in one statement: the job of each item (``job_id``) moves
    only if it is in one of ``sources``, held by ``worker`` (None: by anyone; the attempt still
    fences) at the item's ``attempt``, with the item's ``expect_<column>`` values; it takes the
    ``shared`` values and the item's own values of ``columns``. The jobs that moved, by id (the
    job ids must differ), and whether the statement also wrote their ``kind`` events (with
    ``worker`` as actor, each item's ``error`` and ``event_note``); if not, the caller writes
    them."""
    if not items:
        return Moved({}, recorded=False)
    statement, recorded_here = _move_statement(
        dialects.of(conn), sources, tuple(sorted(shared)), columns, worker is not None, kind
    )
    params = {f"set_{name}": value for name, value in shared.items()}
    params |= {"worker": worker, "at": at}
    params["items"] = parameter((*_KEYS, *columns), items)
    found = (job_of(row) for row in statement.rows(conn, params))
    return Moved({job.id: job for job in found}, recorded_here)


_WANTED: Columns = (("job_id", Kind.BIGINT),)


def _jobs_of_items(dialect: Dialect, locked: bool, *extra: ColumnElement[Any]) -> Select[Any]:
    """The jobs (and ``extra`` columns) of the ids in ``:items``; ``locked``: FOR UPDATE."""
    wanted = dialect.items(_WANTED, "wanted")
    query = select(*JOB_COLUMNS, *extra).where(dialect.among(jobs.c.id, select(wanted.c.job_id)))
    return dialect.locked(query) if locked else query


@lru_cache(maxsize=8)
def _by_ids(dialect: Dialect, locked: bool) -> Prepared:
    """``_jobs_of_items`` for a caller who may see every job (a worker's finish and heartbeat
    read their jobs this way before each report): compiled once, as a hot statement."""
    return Prepared(_jobs_of_items(dialect, locked))


def jobs_by_ids(
    conn: Connection,
    ids: Collection[int],
    visible: ColumnElement[bool] | None,
    *,
    locked: bool = False,
) -> dict[int, tuple[Job, bool]]:
    """The jobs of ``ids`` that exist, each with whether ``visible`` (None: all) selects it;
    ``locked``: kept from other writers until the transaction ends (PostgreSQL's FOR UPDATE;
    SQLite's writers take turns anyway)."""
    if not ids:
        return {}
    dialect = dialects.of(conn)
    params = {"items": parameter(_WANTED, [{"job_id": job_id} for job_id in ids])}
    if visible is None:
        found = (job_of(row) for row in _by_ids(dialect, locked).rows(conn, params))
        return {job.id: (job, True) for job in found}
    query = _jobs_of_items(dialect, locked, visible)
    return {
        job.id: (job, bool(row[-1]))
        for row in conn.execute(query, params)
        for job in (job_of(row[:-1]),)
    }
