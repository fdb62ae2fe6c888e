"""When the queue next has work by the clock alone: the next ``run_at`` or lease end."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, bindparam, func, literal_column, select

from app.queue.flow_claim import HELD_BACK_UNTIL
from app.schema import jobs

# Literal statuses so the partial indexes (ix_jobs_pending, ix_jobs_lease) serve both probes.
_NEXT_RUN = select(func.min(jobs.c.run_at)).where(
    jobs.c.status == literal_column("'pending'"), jobs.c.run_at > bindparam("now")
)
_NEXT_LEASE_END = select(func.min(jobs.c.lease_expires_at)).where(
    jobs.c.status == literal_column("'running'")
)


def next_due_at(conn: Connection, now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which a job becomes claimable without any write:
    a pending job's ``run_at`` (scheduled, backing off) or a running job's lease end, or when
    the claim just made in this transaction found due jobs held back by their type's limits,
    the instant worth looking again (``flow_claim``)."""
    run_at = conn.execute(_NEXT_RUN, {"now": now}).scalar()
    lease_end = conn.execute(_NEXT_LEASE_END).scalar()
    held_back = conn.info.pop(HELD_BACK_UNTIL, None)
    instants = [t for t in (run_at, lease_end, held_back) if t is not None]
    return min(instants) if instants else None
