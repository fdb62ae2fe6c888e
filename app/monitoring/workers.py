"""The workers overview: per worker identity, what it holds now and did in the last hour."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, func, literal_column, select

from app.queue.usecases import stats
from app.storage.schema import jobs

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
    # The last hour in whole minutes, from the activity the database counts per worker.
    since = now.replace(second=0, microsecond=0) - WINDOW + timedelta(minutes=1)
    found = stats.worker_figures(conn, since)
    # From the counts the database keeps, then two index probes per worker that runs jobs.
    for name, running in found.running.items():
        row = rows.setdefault(name, WorkerRow(name, running=running))
        row.next_lease_expiry, touched = conn.execute(_HELD, {"worker": name}).one()
        row.seen(touched)
    for name, kind, count, last in found.activity:
        row = rows.setdefault(name, WorkerRow(name))
        setattr(row, kind, count)
        row.seen(last)
    return sorted(rows.values(), key=lambda r: (-r.running, -r.claimed, r.name))


def _of_worker(column: Any, worker: Any) -> Any:
    """A scalar subquery over the running jobs of ``worker`` (literal status: partial index)."""
    return (
        select(column)
        .where(jobs.c.status == literal_column("'running'"), jobs.c.worker_id == worker)
        .scalar_subquery()
    )


_WORKER: Any = bindparam("worker")
# Its next lease expiry (ix_jobs_running_worker) and last heartbeat (ix_jobs_running_seen).
_HELD = select(
    _of_worker(func.min(jobs.c.lease_expires_at), _WORKER),
    _of_worker(func.max(jobs.c.updated_at), _WORKER),
)
