"""The figures the triggers keep, counted again from scratch: from the jobs and their events
alone (a worker held a job when an event says it claimed it), in Python, to compare with what
the database kept."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

from sqlalchemy import Connection, func, select

from app.queue.vocabulary.states import JobStatus
from app.storage.schema import job_events, jobs
from app.storage.schema_figures import (
    finished_per_minute,
    job_counts,
    job_holders,
    worker_activity,
)

Key = tuple[str, ...]


def _holders(conn: Connection) -> set[tuple[str, int]]:
    claims = select(job_events.c.actor, job_events.c.job_id).where(
        job_events.c.to_status == "running", job_events.c.actor.is_not(None)
    )
    return {(actor, job_id) for actor, job_id in conn.execute(claims)}


def _scopes(conn: Connection, *, running: bool = False) -> dict[int, list[str]]:
    """Every job's scopes: everyone's, its owner's, each of its holders' (and, ``running``, its
    worker's while it runs)."""
    query = select(jobs.c.id, jobs.c.created_by, jobs.c.status, jobs.c.worker_id)
    scopes = {}
    for job_id, owner, status, worker in conn.execute(query):
        scopes[job_id] = ["*", f"owner:{owner}"]
        if running and status == "running":
            scopes[job_id].append(f"worker:{worker}")
    for worker, job_id in _holders(conn):
        scopes[job_id].append(f"holder:{worker}")
    return scopes


def kept_counts(conn: Connection) -> Counter[Key]:
    """What ``job_counts`` says, shards summed, zeros left out."""
    c = job_counts.c
    statuses = [status.value for status in JobStatus]
    query = select(c.scope, c.type, c.priority, *(func.sum(c[s]) for s in statuses)).group_by(
        c.scope, c.type, c.priority
    )
    kept: Counter[Key] = Counter()
    for scope, job_type, priority, *ns in conn.execute(query):
        for status, n in zip(statuses, ns, strict=True):
            if n:
                kept[(scope, job_type, status, str(priority))] = int(n)
    return kept


def recounted(conn: Connection) -> Counter[Key]:
    """The same counts from the jobs themselves."""
    scopes = _scopes(conn, running=True)
    expected: Counter[Key] = Counter()
    for job_id, job_type, status, priority in conn.execute(
        select(jobs.c.id, jobs.c.type, jobs.c.status, jobs.c.priority)
    ):
        for scope in scopes[job_id]:
            expected[(scope, job_type, status, str(priority))] += 1
    return expected


def kept_holders(conn: Connection) -> set[tuple[str, int, str, datetime]]:
    return {tuple(row) for row in conn.execute(select(job_holders))}  # type: ignore[misc]


def recounted_holders(conn: Connection) -> set[tuple[str, int, str, datetime]]:
    job = {
        i: (status, run_at)
        for i, status, run_at in conn.execute(select(jobs.c.id, jobs.c.status, jobs.c.run_at))
    }
    return {(worker, job_id, *job[job_id]) for worker, job_id in _holders(conn)}


def window_start(end: datetime) -> datetime:
    """The first minute of the hour-long window that ends in the minute of ``end``."""
    return end.replace(second=0, microsecond=0) - timedelta(minutes=59)


def kept_finishes(conn: Connection, since: datetime) -> Counter[Key]:
    t = finished_per_minute.c
    query = (
        select(t.scope, t.status, t.minute, func.sum(t.n))
        .where(t.minute >= since)
        .group_by(t.scope, t.status, t.minute)
    )
    return Counter({(s, st, m.isoformat()): int(n) for s, st, m, n in conn.execute(query) if n})


def _minute(at: datetime) -> str:
    return at.replace(second=0, microsecond=0).isoformat()


def recounted_finishes(conn: Connection, since: datetime) -> Counter[Key]:
    """Completions and final failures per scope and minute, from the events."""
    scopes = _scopes(conn)
    query = select(job_events.c.job_id, job_events.c.to_status, job_events.c.at).where(
        job_events.c.to_status.in_(["completed", "failed"]), job_events.c.at >= since
    )
    expected: Counter[Key] = Counter()
    for job_id, status, at in conn.execute(query):
        for scope in scopes[job_id]:
            expected[(scope, status, _minute(at))] += 1
    return expected


def kept_activity(conn: Connection, since: datetime) -> dict[Key, tuple[int, datetime]]:
    t = worker_activity.c
    query = (
        select(t.worker, t.kind, func.sum(t.n), func.max(t.last_at))
        .where(t.minute >= since)
        .group_by(t.worker, t.kind)
    )
    return {(w, k): (int(n), last) for w, k, n, last in conn.execute(query)}


def recounted_activity(conn: Connection, since: datetime) -> dict[Key, tuple[int, datetime]]:
    """Claims, completions and final failures per worker, from the events."""
    e = job_events.c
    query = (
        select(e.actor, e.kind, func.count(), func.max(e.at))
        .where(e.actor.is_not(None), e.kind.in_(["claimed", "completed", "failed"]), e.at >= since)
        .group_by(e.actor, e.kind)
    )
    return {(w, k): (int(n), last) for w, k, n, last in conn.execute(query)}


def assert_exact(conn: Connection, end: datetime) -> None:
    """Every kept figure equals its recount (the rings over the window ending at ``end``)."""
    since = window_start(end)
    assert kept_counts(conn) == recounted(conn)
    assert kept_holders(conn) == recounted_holders(conn)
    assert kept_finishes(conn, since) == recounted_finishes(conn, since)
    assert kept_activity(conn, since) == recounted_activity(conn, since)
