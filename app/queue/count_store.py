"""Reads of the figures the database keeps itself (``app.schema``, migration 0009's triggers):
job counts per scope, finishes per minute and worker activity, each summed over its shards."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, func, select

from app.queue.models import Actor
from app.queue.policy import Scope, scope
from app.schema import UTCDateTime, finished_per_minute, job_counts, worker_activity

EVERYONE = "*"
_SINCE = bindparam("since", type_=UTCDateTime())
# Built once: every dashboard and scrape runs them.
_COUNTS = (
    select(job_counts.c.status, job_counts.c.priority, func.sum(job_counts.c.n))
    .where(job_counts.c.scope == bindparam("scope"))
    .group_by(job_counts.c.status, job_counts.c.priority)
)
_BY_STATUS_TYPE = (
    select(job_counts.c.status, job_counts.c.type, func.sum(job_counts.c.n))
    .where(job_counts.c.scope == EVERYONE)
    .group_by(job_counts.c.status, job_counts.c.type)
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
# The 'worker:<name>' scopes: a range of the primary key (':' is followed by ';').
_RUNNING = (
    select(job_counts.c.scope, func.sum(job_counts.c.n))
    .where(job_counts.c.scope >= "worker:", job_counts.c.scope < "worker;")
    .group_by(job_counts.c.scope)
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


def scope_of(actor: Actor) -> str:
    """The scope of the figures ``actor`` may see (the same jobs as its lists)."""
    seen = scope(actor)
    if seen is Scope.ALL:
        return EVERYONE
    if seen is Scope.HELD:
        return f"holder:{actor.name}"
    return f"owner:{actor.id}"


def counts(conn: Connection, of: str) -> list[tuple[str, int, int]]:
    """``(status, priority, jobs)`` of scope ``of``; keys without jobs may be missing."""
    return [
        (status, priority, int(n)) for status, priority, n in conn.execute(_COUNTS, {"scope": of})
    ]


def counts_by_status_type(conn: Connection) -> list[tuple[str, str, int]]:
    """``(status, type, jobs)`` of every job."""
    return [(status, job_type, int(n)) for status, job_type, n in conn.execute(_BY_STATUS_TYPE)]


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
