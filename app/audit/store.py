"""All SQL on ``audit_events``: append (``record``: who, from where and when are the caller's),
read a page, prune. Nothing else touches the table."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, insert, select

from app.audit.actions import AuditAction, AuditEvent, AuditFilters, Origin
from app.storage.schema import audit_events

ACTOR_LENGTH = 64
TARGET_LENGTH = 200
ADDRESS_LENGTH = 64


def append(
    conn: Connection,
    *,
    at: datetime,
    actor: str,
    action: AuditAction,
    target: str | None = None,
    details: dict[str, Any] | None = None,
    client_address: str | None = None,
) -> int:
    """Append one event in the caller's transaction (it vanishes if the transaction does);
    returns its id."""
    result = conn.execute(
        insert(audit_events).values(
            at=at,
            actor=actor[:ACTOR_LENGTH],
            action=action.value,
            target=target[:TARGET_LENGTH] if target is not None else None,
            details=details,
            client_address=client_address[:ADDRESS_LENGTH] if client_address else None,
        )
    )
    key = result.inserted_primary_key
    assert key is not None  # an INSERT always has one
    return int(key[0])


def record(
    conn: Connection,
    origin: Origin,
    action: AuditAction,
    target: str | None = None,
    *,
    at: datetime,
    **details: Any,
) -> int:
    """Append ``action`` on ``target`` by ``origin`` at ``at`` to the audit log, in the caller's
    transaction; returns the event's id."""
    return append(
        conn,
        at=at,
        actor=origin.actor,
        action=action,
        target=target,
        details=details or None,
        client_address=origin.address,
    )


def page(conn: Connection, filters: AuditFilters) -> tuple[list[AuditEvent], bool]:
    """Events matching ``filters``, newest first; the flag says whether older ones follow."""
    query = select(audit_events).order_by(audit_events.c.id.desc()).limit(filters.limit + 1)
    if filters.actor is not None:
        query = query.where(audit_events.c.actor == filters.actor)
    if filters.action is not None:
        query = query.where(audit_events.c.action == filters.action.value)
    if filters.since is not None:
        query = query.where(audit_events.c.at >= filters.since)
    if filters.until is not None:
        query = query.where(audit_events.c.at < filters.until)
    if filters.before_id is not None:
        query = query.where(audit_events.c.id < filters.before_id)
    rows = conn.execute(query).all()
    events = [AuditEvent.from_row(row._mapping) for row in rows[: filters.limit]]
    return events, len(rows) > filters.limit


def any_before(conn: Connection, before: datetime) -> bool:
    """Whether an event is older than ``before`` (one probe of the time index)."""
    oldest = select(audit_events.c.id).where(audit_events.c.at < before).limit(1)
    return conn.execute(oldest).first() is not None


def prune(conn: Connection, *, before: datetime, batch: int) -> int:
    """Delete up to ``batch`` events older than ``before`` (retention and ``audit prune``)."""
    oldest = (
        select(audit_events.c.id)
        .where(audit_events.c.at < before)
        .order_by(audit_events.c.at)
        .limit(batch)
    )
    result = conn.execute(delete(audit_events).where(audit_events.c.id.in_(oldest)))
    return int(result.rowcount)
