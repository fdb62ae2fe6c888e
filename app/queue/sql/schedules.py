"""All SQL on schedules. A tick claims a slot with one compare-and-set on ``next_run_at``,
so however many processes tick at once, one of them wins each slot."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, delete, exists, insert, select, update
from sqlalchemy.exc import IntegrityError

from app.queue.sql import dialects
from app.queue.vocabulary.schedules import Schedule
from app.queue.vocabulary.states import Role
from app.storage.schema import schedules, users

_COLUMNS = [schedules.c[name] for name in Schedule.__dataclass_fields__]


class DuplicateName(Exception):
    """Another schedule already has this name."""


def _write(conn: Connection, statement: Any) -> Any:
    """Run an INSERT or UPDATE in a savepoint; a clash on the unique name is ``DuplicateName``."""
    try:
        with conn.begin_nested():
            return conn.execute(statement).first()
    except IntegrityError as exc:
        # SQLite names the column, PostgreSQL the constraint.
        if any(mark in str(exc.orig) for mark in ("schedules.name", "uq_schedules_name")):
            raise DuplicateName from None
        raise


def insert_schedule(conn: Connection, values: Mapping[str, Any]) -> Schedule:
    """Insert a schedule; ``DuplicateName`` when the name is taken."""
    row = _write(conn, insert(schedules).values(**values).returning(*_COLUMNS))
    return Schedule.from_row(row._mapping)


def update_schedule(
    conn: Connection, schedule_id: int, values: Mapping[str, Any]
) -> Schedule | None:
    """Change a schedule's columns; None if it does not exist, ``DuplicateName`` on a clash."""
    statement = (
        update(schedules).where(schedules.c.id == schedule_id).values(**values).returning(*_COLUMNS)
    )
    row = _write(conn, statement)
    return Schedule.from_row(row._mapping) if row else None


def get_schedule(conn: Connection, schedule_id: int) -> Schedule | None:
    """One schedule by id."""
    row = conn.execute(select(*_COLUMNS).where(schedules.c.id == schedule_id)).first()
    return Schedule.from_row(row._mapping) if row else None


def list_schedules(conn: Connection) -> list[Schedule]:
    """Every schedule, by name."""
    rows = conn.execute(select(*_COLUMNS).order_by(schedules.c.name))
    return [Schedule.from_row(row._mapping) for row in rows]


def delete_schedule(conn: Connection, schedule_id: int) -> bool:
    """Delete a schedule; False if it did not exist."""
    deleted = conn.execute(
        delete(schedules).where(schedules.c.id == schedule_id).returning(schedules.c.id)
    ).first()
    return deleted is not None


def _due(now: datetime) -> Any:
    # A range on ix_schedules_next_run_at; disabled schedules have no next_run_at.
    return schedules.c.next_run_at <= now


def any_due(conn: Connection, now: datetime) -> bool:
    """Whether some schedule has a slot at or before ``now`` (one index probe)."""
    return bool(conn.execute(select(exists().where(_due(now)))).scalar())


def due_schedules(conn: Connection, now: datetime, limit: int) -> list[Schedule]:
    """Schedules with a slot due, oldest slot first. On PostgreSQL the rows another ticker is
    firing are skipped rather than waited for (its compare-and-set would win anyway)."""
    query = (
        select(*_COLUMNS)
        .where(_due(now), schedules.c.enabled)
        .order_by(schedules.c.next_run_at, schedules.c.id)
        .limit(limit)
    )
    query = dialects.of(conn).skip_locked(query)
    return [Schedule.from_row(row._mapping) for row in conn.execute(query)]


def creator_may_run(conn: Connection, user_id: int) -> bool:
    """Whether a schedule's creator is still an enabled admin: schedules run in their name,
    and only admins manage schedules."""
    row = conn.execute(select(users.c.role, users.c.disabled).where(users.c.id == user_id)).first()
    return row is not None and row.role == Role.ADMIN.value and not row.disabled


def claim_slot(
    conn: Connection,
    schedule_id: int,
    *,
    slot: datetime,
    next_run_at: datetime | None,
    last_run_at: datetime | None,
) -> bool:
    """Move a schedule from ``slot`` to ``next_run_at`` if it still waits for ``slot``.

    True for the one caller that moved it: only that caller enqueues the slot's job, in the
    same transaction. ``last_run_at`` None leaves the last run as it was (a skipped slot)."""
    values: dict[str, Any] = {"next_run_at": next_run_at}
    if last_run_at is not None:
        values["last_run_at"] = last_run_at
    moved = conn.execute(
        update(schedules)
        .where(
            schedules.c.id == schedule_id,
            schedules.c.next_run_at == slot,
            schedules.c.enabled,
        )
        .values(**values)
        .returning(schedules.c.id)
    ).first()
    return moved is not None


def set_last_run(conn: Connection, schedule_id: int, at: datetime) -> None:
    """Record a run started by hand ("run now")."""
    conn.execute(update(schedules).where(schedules.c.id == schedule_id).values(last_run_at=at))
