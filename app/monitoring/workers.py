"""The workers overview: per worker identity, what it holds now and did in the last hour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, func, select

from app.queue import count_store
from app.queue.states import JobStatus
from app.schema import jobs

WINDOW = timedelta(hours=1)


@dataclass
class WorkerRow:
    """One worker identity on the workers page."""

    name: str
    running: int = 0
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    last_seen: datetime | None = None
    next_lease_expiry: datetime | None = None

    def seen(self, at: datetime | None) -> None:
        """Keep the latest sighting."""
        if at is not None and (self.last_seen is None or at > self.last_seen):
            self.last_seen = at


def workers(conn: Connection, *, now: datetime) -> list[WorkerRow]:
    """Every worker that holds a job or acted in the last hour, busiest first."""
    rows: dict[str, WorkerRow] = {}
    held = (
        select(
            jobs.c.worker_id,
            func.count(),
            func.min(jobs.c.lease_expires_at),
            func.max(jobs.c.updated_at),
        )
        .where(jobs.c.status == JobStatus.RUNNING)
        .group_by(jobs.c.worker_id)
    )
    for name, running, expiry, touched in conn.execute(held):
        row = rows.setdefault(name, WorkerRow(name))
        row.running, row.next_lease_expiry = int(running), expiry
        row.seen(touched)
    # The last hour in whole minutes, from the activity the database counts per worker.
    since = now.replace(second=0, microsecond=0) - WINDOW + timedelta(minutes=1)
    for name, kind, count, last in count_store.worker_activity_since(conn, since):
        row = rows.setdefault(name, WorkerRow(name))
        setattr(row, kind, count)
        row.seen(last)
    return sorted(rows.values(), key=lambda r: (-r.running, -r.claimed, r.name))
