"""The SQL the explainer reads: a job's place in the claim order and the latest claims of a
type. Every query is bounded by a LIMIT and served by an index."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, literal, literal_column, or_, select

from app.queue.sql.jobs import PENDING as CLAIMABLE
from app.queue.vocabulary.models import Job
from app.queue.vocabulary.states import PRIORITIES
from app.storage.schema import job_events, jobs

# The partial claim index only serves a query naming the same literal terms.
_PENDING = CLAIMABLE


def _count(conn: Connection, conditions: list[Any], limit: int) -> int:
    """How many pending jobs meet ``conditions``, counting no further than ``limit``."""
    bounded = select(literal(1)).where(_PENDING, *conditions).limit(limit).subquery()
    return int(conn.execute(select(func.count()).select_from(bounded)).scalar_one())


def jobs_ahead(conn: Connection, job: Job, now: datetime, cap: int) -> int:
    """How many due pending jobs a claim takes before ``job`` (priority DESC, run_at, id),
    counted up to ``cap``. One range of ix_jobs_claim per priority at or above the job's."""
    ahead = 0
    for priority in sorted((p for p in PRIORITIES.values() if p > job.priority), reverse=True):
        ahead += _count(conn, [jobs.c.priority == priority, jobs.c.run_at <= now], cap - ahead)
        if ahead >= cap:
            return cap
    same_band = [
        jobs.c.priority == job.priority,
        jobs.c.run_at <= job.run_at,
        or_(jobs.c.run_at < job.run_at, jobs.c.id < job.id),
    ]
    return ahead + _count(conn, same_band, cap - ahead)


def latest_claim_of_type(
    conn: Connection, job_type: str, since: datetime, scan: int
) -> datetime | None:
    """When a job of ``job_type`` was last claimed after ``since``, looking at the ``scan``
    most recent claims of any type (ix_job_events_claims, newest first)."""
    recent = (
        select(job_events.c.job_id, job_events.c.at)
        .where(job_events.c.to_status == literal_column("'running'"), job_events.c.at >= since)
        .order_by(job_events.c.at.desc())
        .limit(scan)
        .subquery()
    )
    query = (
        select(func.max(recent.c.at))
        .select_from(recent.join(jobs, jobs.c.id == recent.c.job_id))
        .where(jobs.c.type == job_type)
    )
    found: datetime | None = conn.execute(query).scalar()
    return found
