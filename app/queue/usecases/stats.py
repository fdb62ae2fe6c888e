"""Queue figures from the counts the database keeps and index probes: the dashboard (what an
actor may see), and what operators read beside it (a scrape's job figures, the workers page)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, and_

from app.queue.rules import policy
from app.queue.rules.visibility import viewer
from app.queue.sql import counts as counts_sql
from app.queue.sql import jobs as jobs_sql
from app.queue.sql import workflows as workflows_sql
from app.queue.vocabulary.actors import Actor
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import PRIORITIES, JobStatus
from app.storage.schema import jobs

WINDOW_MINUTES = 60
LATEST_FAILURES = 10


@dataclass(frozen=True)
class MinuteCount:
    """Jobs that finished in one minute of the chart window."""

    start: datetime
    completed: int
    failed: int


@dataclass(frozen=True)
class NotDue:
    """Why none of the pending jobs an actor sees is due, when none is: how many are of paused
    types, how many wait for parent jobs, and how many for their run time (scheduled, or
    backing off after a failure). A job both paused and waiting counts as paused."""

    paused: int
    waiting: int
    scheduled: int


@dataclass(frozen=True)
class Dashboard:
    """What the dashboard shows; ``latest_failures`` stays empty for non-admins."""

    by_status: dict[str, int]
    by_priority: dict[str, int]
    oldest_pending_age: timedelta | None
    paused_types: list[str]  # left out of oldest_pending_age: no claim hands their jobs out
    per_minute: list[MinuteCount]
    latest_failures: list[Job]
    waiting: int = 0  # pending jobs waiting for parents (not due whatever their run_at)
    not_due: NotDue | None = None  # set when jobs are pending and none of them is due


def dashboard(
    conn: Connection, actor: Actor, *, now: datetime, paused: list[str] | None = None
) -> Dashboard:
    """The figures of the jobs ``actor`` may see (the same visibility as the job list), read
    from the counts the database keeps rather than from the jobs themselves. The oldest due job
    leaves out the ``paused`` types: it says how long claimable work has waited."""
    paused = paused or []
    of = viewer(actor).counts_scope
    statuses: Counter[str] = Counter()
    priorities: Counter[int] = Counter()
    for status, priority, n in counts_sql.counts(conn, of):
        statuses[status] += n
        priorities[priority] += n
    pending = statuses[JobStatus.PENDING]
    oldest = _oldest_due(conn, actor, now, paused) if pending else None
    waiting = _waiting(conn, actor) if pending else 0
    return Dashboard(
        by_status={status.value: statuses[status.value] for status in JobStatus},
        by_priority={
            label: priorities[number]
            for label, number in sorted(PRIORITIES.items(), key=lambda item: -item[1])
        },
        oldest_pending_age=max(now - oldest, timedelta(0)) if oldest else None,
        paused_types=paused,
        per_minute=_per_minute(conn, now, of),
        # Failures carry error texts, which only admins may read.
        latest_failures=jobs_sql.latest_failures(conn, LATEST_FAILURES)
        if policy.sees_errors(actor)
        else [],
        waiting=waiting,
        not_due=_not_due(conn, actor, pending, waiting, paused) if pending and not oldest else None,
    )


def _waiting(conn: Connection, actor: Actor) -> int:
    """How many of the pending jobs ``actor`` sees wait for parents (a worker's never do: a
    waiting job was never claimed)."""
    seen = viewer(actor)
    return 0 if seen.holder is not None else workflows_sql.count_waiting(conn, seen.owner)


def _not_due(
    conn: Connection, actor: Actor, pending: int, waiting: int, paused: list[str]
) -> NotDue:
    """Why none of ``pending`` jobs is due: paused types first (from the counts the database
    keeps), then parents (of the ``waiting`` ones, those not of a paused type), then run times."""
    seen = viewer(actor)
    held = 0
    if paused:
        by_type = counts_sql.counts_of_types(conn, paused, seen.counts_scope)
        held = sum(counts.get(JobStatus.PENDING, 0) for counts in by_type.values())
    if held and waiting:  # a worker's jobs never wait for parents (``_waiting``)
        waiting -= workflows_sql.count_waiting(conn, seen.owner, paused)
    return NotDue(paused=held, waiting=waiting, scheduled=max(pending - held - waiting, 0))


def _oldest_due(
    conn: Connection, actor: Actor, now: datetime, paused: list[str]
) -> datetime | None:
    """When the longest-waiting due job ``actor`` may see became due, not counting ``paused``
    types (a worker's through its holder rows, which do not know the type: paused types
    count there)."""
    seen = viewer(actor)
    if seen.holder is not None:
        return jobs_sql.oldest_held_pending_run_at(conn, now, seen.holder)
    visible = seen.condition()
    if paused:
        claimable = jobs.c.type.not_in(paused)
        visible = claimable if visible is None else and_(visible, claimable)
    return jobs_sql.oldest_pending_run_at(conn, now, visible)


def _per_minute(conn: Connection, now: datetime, of: str) -> list[MinuteCount]:
    """Completions and final failures per minute over the last hour, oldest minute first."""
    current_minute = now.replace(second=0, microsecond=0)
    start = current_minute - timedelta(minutes=WINDOW_MINUTES - 1)
    completed = [0] * WINDOW_MINUTES
    failed = [0] * WINDOW_MINUTES
    for at, status, count in counts_sql.finished_since(conn, of, start):
        index = int((at - start).total_seconds() // 60)
        if 0 <= index < WINDOW_MINUTES:
            (completed if status == JobStatus.COMPLETED else failed)[index] += count
    return [
        MinuteCount(start + timedelta(minutes=i), completed[i], failed[i])
        for i in range(WINDOW_MINUTES)
    ]


@dataclass(frozen=True)
class ScrapeFigures:
    """The queue's part of a /metrics scrape."""

    by_status_type: list[tuple[str, str, int]]  # (status, type, jobs) of every job
    held_by_dependencies: dict[str, int]  # per type, the pending jobs waiting for parents


def scrape_figures(conn: Connection) -> ScrapeFigures:
    """Jobs per status and type, and those held back by their parents, as the counts say."""
    return ScrapeFigures(
        counts_sql.counts_by_status_type(conn), workflows_sql.waiting_by_type(conn)
    )


@dataclass(frozen=True)
class WorkerFigures:
    """What the counts say of each worker identity."""

    running: dict[str, int]  # jobs running for each worker now (none: left out)
    activity: list[tuple[str, str, int, datetime]]  # (worker, kind, events, last at) since


def worker_figures(conn: Connection, since: datetime) -> WorkerFigures:
    """Each worker's running jobs, and its claims, completions and failures since ``since``."""
    activity = counts_sql.worker_activity_since(conn, since)
    return WorkerFigures(counts_sql.running_by_worker(conn), activity)
