"""SQL of bulk operations: count, sample and read the jobs a filter selects, lock a batch of
them, and delete finished jobs with a DELETE that restates what "finished" means."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, func, select

from app.queue.models import Job
from app.queue.states import TERMINAL
from app.queue.store import JOB_COLUMNS
from app.schema import jobs

# Rows fetched per round trip while reading a set (a server-side cursor on PostgreSQL), so a
# large set never sits in the driver's memory at once.
STREAM_ROWS = 5_000


def selected(
    statuses: Collection[str], created_after: datetime | None, created_before: datetime | None
) -> list[ColumnElement[bool]]:
    """Jobs in one of ``statuses``, created strictly between the two instants (when given)."""
    conditions: list[ColumnElement[bool]] = [jobs.c.status.in_(sorted(statuses))]
    if created_after is not None:
        conditions.append(jobs.c.created_at > created_after)
    if created_before is not None:
        conditions.append(jobs.c.created_at < created_before)
    return conditions


def count(conn: Connection, conditions: Sequence[ColumnElement[bool]]) -> int:
    """How many jobs match."""
    query = select(func.count()).select_from(jobs).where(*conditions)
    return int(conn.execute(query).scalar_one())


def newest(conn: Connection, conditions: Sequence[ColumnElement[bool]], limit: int) -> list[Job]:
    """The newest ``limit`` matching jobs."""
    query = select(*JOB_COLUMNS).where(*conditions).order_by(jobs.c.id.desc()).limit(limit)
    return [Job.from_row(row._mapping) for row in conn.execute(query)]


def states(
    conn: Connection, conditions: Sequence[ColumnElement[bool]], limit: int
) -> Iterator[tuple[int, str, int]]:
    """``(id, status, attempts)`` of up to ``limit`` matching jobs, streamed. No ORDER BY: any
    order will do (each batch is sorted), and sorting a large set would cost the server memory."""
    query = select(jobs.c.id, jobs.c.status, jobs.c.attempts).where(*conditions).limit(limit)
    for job_id, status, attempts in conn.execute(
        query, execution_options={"yield_per": STREAM_ROWS}
    ):
        yield int(job_id), str(status), int(attempts)


def lock(conn: Connection, ids: Sequence[int]) -> list[Job]:
    """The jobs ``ids`` as they are now, in id order. PostgreSQL locks them and skips any that
    another transaction holds (it is changing them): the batch then never waits for a worker
    that might wait for the batch, so the two cannot deadlock."""
    query = select(*JOB_COLUMNS).where(jobs.c.id.in_(ids)).order_by(jobs.c.id)
    if conn.dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)
    return [Job.from_row(row._mapping) for row in conn.execute(query)]


def delete_finished(conn: Connection, ids: Sequence[int]) -> int:
    """Delete those of ``ids`` that are finished (their events go by ON DELETE CASCADE). The
    DELETE restates "finished", so a job retried since it was read stays."""
    if not ids:
        return 0
    statement = (
        delete(jobs)
        .where(jobs.c.id.in_(ids), jobs.c.status.in_(sorted(TERMINAL)))
        .returning(jobs.c.id)
    )
    return len(conn.execute(statement).all())
