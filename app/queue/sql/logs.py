"""SQL of attempt logs: a request's lines appended as one row, the attempt's size read for its
cap, the oldest rows dropped or cut when the cap is passed, and a job's logs read per attempt."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from functools import lru_cache
from typing import NamedTuple

from sqlalchemy import Connection, delete, func, select, update

from app.queue.sql import dialects
from app.queue.sql import rows as rows_sql
from app.queue.sql.dialects import Dialect
from app.queue.sql.items import Columns, Kind, parameter
from app.queue.sql.prepared import Prepared
from app.storage.schema_logs import job_logs

Key = tuple[int, int]  # (job id, attempt)


class LogRow(NamedTuple):
    """One request's lines as stored: ``lines`` is their JSON array; ``dropped`` counts the
    older lines of the attempt the cap removed (on the attempt's oldest row only)."""

    id: int
    attempt: int
    at: datetime
    lines: str
    size: int
    dropped: int


class NewRow(NamedTuple):
    """One request's (or item's) lines to store: a JSON array of ``size`` bytes of text."""

    job_id: int
    attempt: int
    at: datetime
    lines: str
    size: int
    dropped: int


_ATTEMPT: Columns = (("job_id", Kind.BIGINT), ("attempt", Kind.INTEGER))


@lru_cache(maxsize=4)
def _sizes(dialect: Dialect) -> Prepared:
    # A sum per item, each found by its range of the (job_id, attempt, id) index: an IN over
    # row values of the table, or a join, lets the planner walk the whole index instead.
    item = dialect.items(_ATTEMPT)
    size = (
        select(func.sum(job_logs.c.size))
        .where(job_logs.c.job_id == item.c.job_id, job_logs.c.attempt == item.c.attempt)
        .scalar_subquery()
    )
    return Prepared(select(item.c.job_id, item.c.attempt, size))


def attempt_sizes(conn: Connection, attempts: Collection[tuple[int, int]]) -> dict[Key, int]:
    """The UTF-8 size of the lines each attempt (``(job id, attempt)``) keeps; an attempt
    without lines is absent (one range of the index each)."""
    if not attempts:
        return {}
    items = parameter(_ATTEMPT, [{"job_id": j, "attempt": a} for j, a in sorted(attempts)])
    rows = _sizes(dialects.of(conn)).rows(conn, {"items": items})
    return {(int(job_id), int(attempt)): int(size) for job_id, attempt, size in rows if size}


_NEW_ROW: Columns = (
    ("job_id", Kind.BIGINT),
    ("attempt", Kind.INTEGER),
    ("at", Kind.TIMESTAMP),
    ("lines", Kind.TEXT),
    ("size", Kind.INTEGER),
    ("dropped", Kind.INTEGER),
)


@lru_cache(maxsize=4)
def _insert(dialect: Dialect) -> Prepared:
    return Prepared(rows_sql.insert_rows(dialect, job_logs, _NEW_ROW))


def append(conn: Connection, rows: Sequence[NewRow]) -> None:
    """Store each row: one INSERT for all of them, the same statement whatever their number
    (their values as one JSON parameter), none for no rows."""
    if rows:
        items = parameter(_NEW_ROW, [row._asdict() for row in rows])
        _insert(dialects.of(conn)).run(conn, {"items": items})


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
