"""When the queue next has work by the clock alone: the next ``run_at`` or lease end.

Only a job written to become due later counts (``run_at`` after its ``updated_at``): one due
when written was announced by the commit that wrote it. A job enqueued for now just after a
look began has a ``run_at`` after that look's ``now``; counted, it would set the waiting
claims' alarm for an instant already past, and the alarm makes a process forget all it knows
of what is due (in a trickle of single enqueues: an alarm and a few empty looks every 30 ms or
so in the process serving the producer)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, column, text

from app.queue.sql import dialects
from app.queue.sql.dialects import Dialect
from app.queue.sql.jobs import earliest_pending_run_at
from app.storage.schema import jobs
from app.storage.sqltypes import UTCDateTime

_NOW = bindparam("now", type_=UTCDateTime())
_INSTANT = column("instant", UTCDateTime())


def _next_lease_end(dialect: Dialect) -> Any:
    """The earliest lease end of a running job. SQLite is told the partial index to read: its
    planner would walk every running job through ix_jobs_status_id."""
    hint = dialect.index_hint("ix_jobs_lease")
    sql = f"SELECT min(lease_expires_at) AS instant FROM jobs{hint} WHERE status = 'running'"  # noqa: S608
    return text(sql).columns(_INSTANT)


_NEXT_RUN = earliest_pending_run_at(jobs.c.run_at > _NOW, jobs.c.run_at > jobs.c.updated_at)
_NEXT_LEASE_END = {dialect: _next_lease_end(dialect) for dialect in dialects.DIALECTS.values()}


def next_due_at(conn: Connection, now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which a job becomes claimable without any write:
    a pending job's ``run_at`` (scheduled, backing off) or a running job's lease end."""
    run_at = conn.execute(_NEXT_RUN, {"now": now}).scalar()
    lease_end = conn.execute(_NEXT_LEASE_END[dialects.of(conn)]).scalar()
    instants = [t for t in (run_at, lease_end) if t is not None]
    return min(instants) if instants else None
