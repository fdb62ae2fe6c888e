"""When the queue next has work by the clock alone: the next ``run_at`` or lease end."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, func, literal, literal_column, select

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
    a pending job's ``run_at`` (scheduled, backing off) or a running job's lease end."""
    run_at = conn.execute(_NEXT_RUN, {"now": now}).scalar()
    lease_end = conn.execute(_NEXT_LEASE_END).scalar()
    instants = [t for t in (run_at, lease_end) if t is not None]
    return min(instants) if instants else None


def _due_pending(typed: bool) -> Any:
    query = select(literal(1)).where(
        jobs.c.status == literal_column("'pending'"), jobs.c.run_at <= bindparam("now")
    )
    if typed:
        query = query.where(jobs.c.type.in_(bindparam("types", expanding=True)))
    return query.limit(1)


_DUE_PENDING = {typed: _due_pending(typed) for typed in (False, True)}
_LEASE_ENDED = (
    select(literal(1))
    .where(jobs.c.status == literal_column("'running'"), jobs.c.lease_expires_at < bindparam("now"))
    .limit(1)
)


def claimable_now(conn: Connection, now: datetime, types: tuple[str, ...] | None) -> bool:
    """Whether a claim at ``now`` may find work: a due pending job (of ``types``, when given) or
    an expired lease to recover. Read-only, so a claim woken with many others looks before it
    takes the write lock."""
    params: dict[str, Any] = {"now": now}
    if types is not None:
        params["types"] = list(types)
    if conn.execute(_DUE_PENDING[types is not None], params).first() is not None:
        return True
    return conn.execute(_LEASE_ENDED, {"now": now}).first() is not None
