"""SQL of bulk operations: count, sample and read the jobs a filter selects, lock a batch of
them, and delete finished jobs with a DELETE that restates what "finished" means."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, delete, func, select

from app.queue.sql import dialects
from app.queue.sql.jobs import JOB_COLUMNS, job_of
from app.queue.vocabulary.jobs import Job
from app.queue.vocabulary.states import TERMINAL
from app.storage.schema import jobs

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
    return [job_of(row) for row in conn.execute(query)]


def ids(conn: Connection, conditions: Sequence[ColumnElement[bool]], limit: int) -> Iterator[int]:
    """The ids of up to ``limit`` matching jobs, streamed. No ORDER BY: a large set is never
    sorted in the server; batches need no order."""
    query = select(jobs.c.id).where(*conditions).limit(limit)
    for (job_id,) in conn.execute(query, execution_options={"yield_per": STREAM_ROWS}):
        yield int(job_id)


def lock(
    conn: Connection,
    ids: Sequence[int],
    conditions: Sequence[ColumnElement[bool]],
    *,
    wait: bool = False,
) -> tuple[list[Job], list[int]]:
    """Those of ``ids`` that still match ``conditions``, as they are now, in id order, and the
    ids that were busy. PostgreSQL locks the jobs and skips any another transaction holds (it
    is changing them), so a batch never waits for a worker that might wait for the batch and
    the two cannot deadlock; the skipped ones that still match (as last committed) are busy,
    for the caller to try again (``wait``: wait for their locks instead, which only a
    transaction that holds no other job may do). SQLite has one writer at a time: nothing is
    ever busy."""
    query = select(*JOB_COLUMNS).where(jobs.c.id.in_(ids), *conditions).order_by(jobs.c.id)
    dialect = dialects.of(conn)
    if not dialect.locks_rows:
        return [job_of(row) for row in conn.execute(query)], []
    if wait:
        return [job_of(row) for row in conn.execute(dialect.locked(query))], []
    taken = [job_of(row) for row in conn.execute(dialect.skip_locked(query))]
    seen = {job.id for job in taken}
    rest = [job_id for job_id in ids if job_id not in seen]
    if not rest:
        return taken, []
    busy = select(jobs.c.id).where(jobs.c.id.in_(rest), *conditions).order_by(jobs.c.id)
    return taken, [int(job_id) for (job_id,) in conn.execute(busy)]


def delete_finished(conn: Connection, ids: Sequence[int]) -> int:
    """Delete those of ``ids`` that are finished (their events go with them: ON DELETE CASCADE
    on SQLite, the jobs' DELETE trigger on PostgreSQL). The DELETE restates "finished", so a
    job retried since it was read stays."""
    if not ids:
        return 0
    statement = (
        delete(jobs)
        .where(jobs.c.id.in_(ids), jobs.c.status.in_(sorted(TERMINAL)))
        .returning(jobs.c.id)
    )
    return len(conn.execute(statement).all())
