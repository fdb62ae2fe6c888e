"""The dashboard use case: queue figures an actor may see, from index-served store queries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Connection

from app.queue import store
from app.queue.models import Actor, Job
from app.queue.service import visibility
from app.queue.states import PRIORITIES, JobStatus

WINDOW_MINUTES = 60
LATEST_FAILURES = 10


@dataclass(frozen=True)
class MinuteCount:
    """Jobs that finished in one minute of the chart window."""

    start: datetime
    completed: int
    failed: int


@dataclass(frozen=True)
class Dashboard:
    """What the dashboard shows; ``latest_failures`` stays empty for non-admins."""

    by_status: dict[str, int]
    by_priority: dict[str, int]
    oldest_pending_age: timedelta | None
    per_minute: list[MinuteCount]
    latest_failures: list[Job]


def dashboard(conn: Connection, actor: Actor, *, now: datetime) -> Dashboard:
    """The figures of the jobs ``actor`` may see (the same visibility as the job list)."""
    visible = visibility(actor)
    statuses = store.count_by(conn, "status", visible)
    priorities = store.count_by(conn, "priority", visible)
    oldest = store.oldest_pending_run_at(conn, now, visible)
    return Dashboard(
        by_status={status.value: statuses.get(status.value, 0) for status in JobStatus},
        by_priority={
            label: priorities.get(number, 0)
            for label, number in sorted(PRIORITIES.items(), key=lambda item: -item[1])
        },
        oldest_pending_age=max(now - oldest, timedelta(0)) if oldest else None,
        per_minute=_per_minute(conn, now, visible),
        # Failures carry error texts, which only admins may read.
        latest_failures=store.latest_failures(conn, LATEST_FAILURES) if actor.sees_errors else [],
    )


def _per_minute(
    conn: Connection, now: datetime, visible: ColumnElement[bool] | None
) -> list[MinuteCount]:
    """Completions and final failures per minute over the last hour, oldest minute first."""
    current_minute = now.replace(second=0, microsecond=0)
    start = current_minute - timedelta(minutes=WINDOW_MINUTES - 1)
    completed = [0] * WINDOW_MINUTES
    failed = [0] * WINDOW_MINUTES
    for at, status, count in store.finished_per_minute(conn, start, visible):
        index = int((at - start).total_seconds() // 60)
        if 0 <= index < WINDOW_MINUTES:
            (completed if status == JobStatus.COMPLETED else failed)[index] += count
    return [
        MinuteCount(start + timedelta(minutes=i), completed[i], failed[i])
        for i in range(WINDOW_MINUTES)
    ]
