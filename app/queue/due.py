"""When the queue next has work by the clock alone: the next ``run_at`` or lease end."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, column, text

from app.queue.flow_claim import HELD_BACK_UNTIL
from app.queue.store import earliest_pending_run_at
from app.schema import jobs
from app.sqltypes import UTCDateTime

_NOW = bindparam("now", type_=UTCDateTime())
_INSTANT = column("instant", UTCDateTime())


def _on_jobs(select_list: str, index: str, where: str, *params: Any) -> dict[str, Any]:
    """``SELECT select_list FROM jobs WHERE where`` (module constants) per backend. SQLite is
    told the partial index to read: its planner would walk every job of the status through
    ix_jobs_status_id."""
    return {
        backend: text(f"SELECT {select_list} FROM jobs{hint} WHERE {where}").bindparams(*params)  # noqa: S608
        for backend, hint in (("sqlite", f" INDEXED BY {index}"), ("postgresql", ""))
    }


def _instant(statements: dict[str, Any]) -> dict[str, Any]:
    """The statements, their one column read back as an aware UTC instant."""
    return {backend: sql.columns(_INSTANT) for backend, sql in statements.items()}


_NEXT_RUN = earliest_pending_run_at(jobs.c.run_at > _NOW)
_NEXT_LEASE_END = _instant(
    _on_jobs("min(lease_expires_at) AS instant", "ix_jobs_lease", "status = 'running'")
)


def next_due_at(conn: Connection, now: datetime) -> datetime | None:
    """The earliest instant after ``now`` at which a job becomes claimable without any write:
    a pending job's ``run_at`` (scheduled, backing off) or a running job's lease end, or when
    the claim just made in this transaction found due jobs held back by their type's limits,
    the instant worth looking again (``flow_claim``)."""
    run_at = conn.execute(_NEXT_RUN, {"now": now}).scalar()
    lease_end = conn.execute(_NEXT_LEASE_END[conn.dialect.name]).scalar()
    held_back = conn.info.pop(HELD_BACK_UNTIL, None)
    instants = [t for t in (run_at, lease_end, held_back) if t is not None]
    return min(instants) if instants else None
