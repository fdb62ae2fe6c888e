"""SQL of a job's children: the jobs its workers spawned, read through ``ix_jobs_parent``."""

from __future__ import annotations

from sqlalchemy import ColumnElement, Connection, select

from app.queue.domain.models import Job
from app.queue.engines.jobs import JOB_COLUMNS, job_of
from app.schema import jobs


def children(
    conn: Connection, parent_id: int, visible: ColumnElement[bool] | None, limit: int
) -> list[Job]:
    """Up to ``limit`` children of ``parent_id`` that ``visible`` selects (None: all), oldest
    first (the index's order, so the read stops at ``limit``)."""
    conditions = [jobs.c.parent_id == parent_id]
    if visible is not None:
        conditions.append(visible)
    query = select(*JOB_COLUMNS).where(*conditions).order_by(jobs.c.id).limit(limit)
    return [job_of(row) for row in conn.execute(query)]
