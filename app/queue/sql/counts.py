"""Reads of the figures the database keeps itself (``app.storage.schema``, migration 0009's
triggers): job counts per scope, finishes per minute and worker activity, each summed over its
shards."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, select

from app.queue.vocabulary.states import JobStatus
from app.storage.schema_figures import finished_per_minute, job_counts, worker_activity
from app.storage.sqltypes import UTCDateTime

EVERYONE = "*"  # the scope of every job's figures (``jobs_sql.Viewer.counts_scope``)
_SINCE = bindparam("since", type_=UTCDateTime())
_STATUSES = [status.value for status in JobStatus]
_SUMS = [func.sum(job_counts.c[status]) for status in _STATUSES]
# Built once: every dashboard and scrape runs them.
_COUNTS = (
    select(job_counts.c.priority, *_SUMS)
    .where(job_counts.c.scope == bindparam("scope"))
    .group_by(job_counts.c.priority)
)
_BY_TYPE = (
    select(job_counts.c.type, *_SUMS)
    .where(job_counts.c.scope == EVERYONE)
    .group_by(job_counts.c.type)
)
# One scope's figures of some types (``IN`` expanded per call): a range of the primary key each.
_OF_TYPES = (
    select(job_counts.c.type, *_SUMS)
    .where(
        job_counts.c.scope == bindparam("scope"),
        job_counts.c.type.in_(bindparam("types", expanding=True)),
    )
    .group_by(job_counts.c.type)
)
# The 'worker:<name>' scopes: a range of the primary key (':' is followed by ';').
_RUNNING = (
    select(job_counts.c.scope, func.sum(job_counts.c.running))
    .where(job_counts.c.scope >= "worker:", job_counts.c.scope < "worker;")
    .group_by(job_counts.c.scope)
)
_FINISHED = (
    select(
        finished_per_minute.c.minute,
        finished_per_minute.c.status,
        func.sum(finished_per_minute.c.n),
    )
    .where(
        finished_per_minute.c.scope == bindparam("scope"), finished_per_minute.c.minute >= _SINCE
    )
    .group_by(finished_per_minute.c.minute, finished_per_minute.c.status)
)
_ACTIVITY = (
    select(
        worker_activity.c.worker,
        worker_activity.c.kind,
        func.sum(worker_activity.c.n),
        func.max(worker_activity.c.last_at),
    )
    .where(worker_activity.c.minute >= _SINCE)
    .group_by(worker_activity.c.worker, worker_activity.c.kind)
)


def _by_status(rows: Any) -> list[tuple[str, Any, int]]:
    """``(status, key, jobs)`` of rows ``(key, jobs per status...)``, zeros left out."""
    return [
        (status, key, int(n))
        for key, *ns in rows
        for status, n in zip(_STATUSES, ns, strict=True)
        if n
    ]


def counts(conn: Connection, of: str) -> list[tuple[str, int, int]]:
    """``(status, priority, jobs)`` of scope ``of``; keys without jobs may be missing."""
    return _by_status(conn.execute(_COUNTS, {"scope": of}))


def counts_by_status_type(conn: Connection) -> list[tuple[str, str, int]]:
    """``(status, type, jobs)`` of every job."""
    return _by_status(conn.execute(_BY_TYPE))


def counts_of_types(
    conn: Connection, job_types: Collection[str], of: str = EVERYONE
) -> dict[str, dict[str, int]]:
    """Jobs per status of each of ``job_types`` in scope ``of`` (statuses without jobs left
    out)."""
    found: dict[str, dict[str, int]] = {name: {} for name in job_types}
    if job_types:
        rows = conn.execute(_OF_TYPES, {"scope": of, "types": sorted(job_types)})
        for status, job_type, n in _by_status(rows):
            found[job_type][status] = n
    return found


def running_of_types(conn: Connection, job_types: Collection[str]) -> dict[str, int]:
    """How many jobs of each of ``job_types`` run now: what a claim of a type with a
    max_running counts, in its own transaction (the counters move in the statement that moves
    a job)."""
    counts = counts_of_types(conn, job_types)
    return {name: by_status.get(JobStatus.RUNNING, 0) for name, by_status in counts.items()}


def running_by_worker(conn: Connection) -> dict[str, int]:
    """How many jobs run for each worker now (workers running none are left out)."""
    rows = conn.execute(_RUNNING)
    return {scope.removeprefix("worker:"): int(n) for scope, n in rows if n}


def finished_since(conn: Connection, of: str, since: datetime) -> list[tuple[datetime, str, int]]:
    """``(minute, status, jobs)`` of the completions and final failures in scope ``of`` in the
    minutes from ``since`` on (at most the last 60: a ring of minute slots)."""
    rows = conn.execute(_FINISHED, {"scope": of, "since": since})
    return [(minute, status, int(n)) for minute, status, n in rows]


def worker_activity_since(
    conn: Connection, since: datetime
) -> list[tuple[str, str, int, datetime]]:
    """``(worker, kind, events, last at)`` of the claims, completions and final failures each
    worker made in the minutes from ``since`` on (at most the last 60)."""
    rows = conn.execute(_ACTIVITY, {"since": since})
    return [(worker, kind, int(n), last) for worker, kind, n, last in rows]
