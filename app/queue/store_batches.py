"""SQL of the batch use cases: many jobs per statement (an enqueue or a finish of a hundred jobs
costs a few statements, not a few hundred). The per-job rules stay with their single use case."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Connection,
    Integer,
    Text,
    bindparam,
    cast,
    column,
    insert,
    literal_column,
    select,
    text,
    update,
)

from app.queue.models import Job
from app.queue.states import EventKind
from app.queue.store import JOB_COLUMNS, JOB_DUE, append_events, event_row, job_of
from app.queue.store_transitions import status_in
from app.schema import jobs
from app.sqltypes import JSONDocument, UTCDateTime

# Executed with a list of rows, SQLAlchemy sends one multi-row INSERT per page of rows.
_INSERT_JOBS = insert(jobs).returning(*JOB_COLUMNS)
_BY_KEYS = select(*JOB_COLUMNS).where(
    jobs.c.created_by == bindparam("owner"),
    jobs.c.idempotency_key.in_(bindparam("keys", expanding=True)),
)
# Per-job values travel as one JSON parameter, read as rows by the backend's JSON functions,
# so the statement is the same whatever the batch size (built and compiled once).
_ITEMS = {
    "sqlite": text(
        "SELECT json_extract(value, '$.job_id') AS job_id, json_extract(value, '$.attempt') AS "
        "attempt, json_extract(value, '$.result') AS result FROM json_each(:items)"
    ),
    "postgresql": text(
        "SELECT job_id, attempt, result FROM json_to_recordset(CAST(:items AS json)) "
        "AS items(job_id bigint, attempt integer, result text)"
    ),
}


def jobs_by_idempotency_keys(conn: Connection, owner_id: int, keys: Collection[str]) -> list[Job]:
    """The jobs ``owner_id`` enqueued with any of ``keys`` (one indexed lookup per key)."""
    if not keys:
        return []
    rows = conn.execute(_BY_KEYS, {"owner": owner_id, "keys": list(keys)})
    return [job_of(row) for row in rows]


def insert_jobs(conn: Connection, rows: Sequence[Mapping[str, Any]], *, actor: str) -> list[Job]:
    """Insert ``rows`` and their ``enqueued`` events; the jobs come back in the rows' order.
    Raises ``IntegrityError`` when an (owner, idempotency key) exists: the caller's savepoint
    decides what then."""
    if not rows:
        return []
    # One statement assigns ids in the order of its rows, whatever order RETURNING uses.
    result = conn.execute(_INSERT_JOBS, [dict(row) for row in rows])
    added = sorted((job_of(row) for row in result), key=lambda job: job.id)
    conn.info[JOB_DUE] = True
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


@lru_cache(maxsize=16)
def _move_statement(backend: str, sources: frozenset[str], values: tuple[str, ...]) -> Any:
    """The compare-and-set UPDATE of many jobs, each at its own attempt with its own result:
    ``values`` are the same for all of them, ``result`` comes with each item."""
    items = _ITEMS[backend].columns(
        column("job_id", BigInteger), column("attempt", Integer), column("result", Text)
    )
    item = items.subquery("items")
    result: Any = item.c.result if backend == "sqlite" else cast(item.c.result, JSONDocument)
    assignments = {name: bindparam(f"set_{name}", type_=jobs.c[name].type) for name in values}
    held: list[Any] = [jobs.c.worker_id == bindparam("worker"), status_in(sources)]
    if backend == "sqlite":
        # A unary + keeps SQLite from walking the worker's running jobs and scanning the items
        # for each: the items lead, and each finds its job by id.
        held = [
            literal_column("+jobs.worker_id") == bindparam("worker"),
            literal_column("+jobs.status").in_([literal_column(f"'{s}'") for s in sorted(sources)]),
        ]
    return (
        update(jobs)
        .where(jobs.c.id == item.c.job_id, jobs.c.attempts == item.c.attempt, *held)
        .values(**assignments, result=result, updated_at=bindparam("at", type_=UTCDateTime()))
        .returning(*JOB_COLUMNS)
    )


def move_many(
    conn: Connection,
    items: Sequence[tuple[int, int, dict[str, Any] | None]],
    *,
    sources: frozenset[str],
    worker: str,
    values: Mapping[str, Any],
    at: datetime,
    kind: EventKind,
) -> list[Job | None]:
    """Compare-and-set for many ``(job id, attempt, result)`` items in one statement: a job
    moves (``values`` and its result) only if it is in one of ``sources``, held by ``worker``
    at that attempt; each moved job gets its ``kind`` event. Per item, the job it left or None
    (nothing changed for it). The job ids must differ."""
    if not items:
        return []
    (from_status,) = sources
    statement = _move_statement(conn.dialect.name, sources, tuple(sorted(values)))
    params = {f"set_{name}": value for name, value in values.items()}
    params |= {"worker": worker, "at": at}
    # The result as the JSON column would store it: its text, decoded by the column on return.
    params["items"] = json.dumps(
        [{"job_id": i, "attempt": a, "result": json.dumps(r)} for i, a, r in items]
    )
    moved = {job.id: job for job in (job_of(r) for r in conn.execute(statement, params))}
    append_events(
        conn,
        [
            event_row(job=job, at=at, from_status=from_status, kind=kind, actor=worker)
            for job in moved.values()
        ],
    )
    return [moved.get(job_id) for job_id, _, _ in items]
