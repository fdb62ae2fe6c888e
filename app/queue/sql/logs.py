"""SQL of attempt logs: a request's lines appended as one row, the attempt's size read for its
cap, the oldest rows dropped or cut when the cap is passed, and a job's logs read per attempt."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import Connection, delete, func, insert, select, update

from app.storage.schema_logs import job_logs


class LogRow(NamedTuple):
    """One request's lines as stored: ``lines`` is their JSON array; ``dropped`` counts the
    older lines of the attempt the cap removed (on the attempt's oldest row only)."""

    id: int
    attempt: int
    at: datetime
    lines: str
    size: int
    dropped: int


def attempt_size(conn: Connection, job_id: int, attempt: int) -> int:
    """The UTF-8 size of the lines an attempt of a job keeps (one range of the index)."""
    query = select(func.coalesce(func.sum(job_logs.c.size), 0)).where(
        job_logs.c.job_id == job_id, job_logs.c.attempt == attempt
    )
    return int(conn.execute(query).scalar_one())


def append(
    conn: Connection,
    job_id: int,
    attempt: int,
    *,
    at: datetime,
    lines: str,
    size: int,
    dropped: int,
) -> None:
    """Store one request's lines (a JSON array of ``size`` bytes of text)."""
    row = {"attempt": attempt, "at": at, "lines": lines, "size": size, "dropped": dropped}
    conn.execute(insert(job_logs).values(job_id=job_id, **row))


def rows(conn: Connection, job_id: int, attempt: int | None = None) -> list[LogRow]:
    """A job's rows (of one ``attempt``, when given), by attempt, oldest first."""
    query = select(
        job_logs.c.id,
        job_logs.c.attempt,
        job_logs.c.at,
        job_logs.c.lines,
        job_logs.c.size,
        job_logs.c.dropped,
    ).where(job_logs.c.job_id == job_id)
    if attempt is not None:
        query = query.where(job_logs.c.attempt == attempt)
    query = query.order_by(job_logs.c.attempt, job_logs.c.id)
    return [LogRow(*row) for row in conn.execute(query)]


def drop(conn: Connection, ids: Sequence[int]) -> None:
    """Delete the rows ``ids`` (the oldest of an attempt, past its cap)."""
    if ids:
        conn.execute(delete(job_logs).where(job_logs.c.id.in_(ids)))


def rewrite(conn: Connection, row_id: int, *, lines: str, size: int, dropped: int) -> None:
    """Keep only the newer lines of a row the cap cut, counting what was dropped before it."""
    conn.execute(
        update(job_logs)
        .where(job_logs.c.id == row_id)
        .values(lines=lines, size=size, dropped=dropped)
    )
